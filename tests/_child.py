"""Child Python processes that import the bonsai under test.

The suite tests one bonsai: the installed copy when pytest runs as ``pytest`` (CI, the
README's command), the source tree under ``python -m pytest`` from the checkout.  A
child ``python`` must import that same one, so ``child_env`` puts the directory that
holds it first on PYTHONPATH (unless it is a site-packages directory, which the child
finds anyway), and the child must start in a working directory other than the
repository root, whose source tree would win otherwise (``-c`` and ``-m`` put the
working directory first on ``sys.path``).
"""
import os
import site
from pathlib import Path


def bonsai_under_test():
    """The directory of the bonsai package this process imported."""
    import bonsai
    return Path(bonsai.__file__).resolve().parent


def child_env(extra_paths=(), **overrides):
    """A copy of ``os.environ`` (plus ``overrides``) under which a child imports the
    bonsai under test; ``extra_paths`` go on PYTHONPATH after it."""
    env = dict(os.environ, **overrides)
    parent = str(bonsai_under_test().parent)
    site_dirs = {os.path.realpath(d) for d in site.getsitepackages()}
    paths = [] if os.path.realpath(parent) in site_dirs else [parent]
    paths += [str(p) for p in extra_paths]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    return env
