"""The suite is self-contained and tests one bonsai: its data lies in the repository
(listed with its checksums in ``tests/data/README.md``), the repository guard flags a
path touched outside the repository, and child processes import the same bonsai as
the test process.
"""
import gzip
import hashlib
import os
import re
import subprocess
import sys

import numpy as np

import _repo_guard
from conftest import REPO_ROOT, TEST_DATA, bonsai_under_test


def test_every_test_data_file_is_listed_with_its_checksum():
    readme = (TEST_DATA / "README.md").read_text()
    listed = dict(re.findall(r"^\| `([^`]+)` \|.*\| `([0-9a-f]{32})` \|$", readme, re.M))
    # models/: model files written by bonsai releases (no upstream source; see its script)
    files = sorted(p.name for p in TEST_DATA.iterdir() if p.name not in ("README.md", "models"))
    assert files and sorted(listed) == files
    for name in files:
        data = gzip.decompress((TEST_DATA / name).read_bytes())
        assert hashlib.md5(data).hexdigest() == listed[name], name


def _tree(tmp_path):
    """temp/fence/repo (the clone), temp/fence/beside (beside it), temp/fence/venv
    (allowed explicitly), temp/other (elsewhere in the temp dir)."""
    temp = tmp_path / "temp"
    for d in ("fence/repo/tests", "fence/beside", "fence/venv", "other"):
        (temp / d).mkdir(parents=True)
    for f in ("fence/repo/tests/a.txt", "fence/beside/data.txt", "fence/venv/lib.py",
              "other/x.txt"):
        (temp / f).write_text("x")
    return temp


def test_guard_fences_the_directory_the_repository_was_cloned_into(tmp_path):
    temp = _tree(tmp_path)
    g = _repo_guard.Guard(temp / "fence/repo", [temp / "fence/venv"], temp)
    assert not g.outside(temp / "fence/repo/tests/a.txt")
    assert not g.outside(temp / "fence/repo/tests/../tests/a.txt")
    assert not g.outside(temp / "fence/venv/lib.py")
    assert not g.outside(temp / "other/x.txt")
    assert g.outside(temp / "fence/beside/data.txt")
    assert g.outside(temp / "fence/repo/../beside")
    assert not g.outside(temp / "fence/beside/missing.txt")   # a failed probe reads nothing
    os.symlink(temp / "fence/beside/data.txt", temp / "fence/repo/link")
    assert g.outside(temp / "fence/repo/link")                 # followed to its target


def test_guard_outside_the_temp_dir(tmp_path):
    temp = _tree(tmp_path)
    g = _repo_guard.Guard(temp / "fence/repo", [], tmp_path / "elsewhere")
    assert g.outside(temp / "other/x.txt") and g.outside(temp / "fence/venv/lib.py")
    assert not g.outside(temp / "fence/repo/tests/a.txt")


def test_guard_records_per_test_and_forgets_what_was_taken(tmp_path):
    temp = _tree(tmp_path)
    g = _repo_guard.Guard(temp / "fence/repo", [], temp)
    beside = str(temp / "fence/beside/data.txt")
    g.current = "t1"
    g.hook("open", (beside, "r", 0))
    g.hook("open", (os.fsencode(beside), "r", 0))
    g.hook("open", (3, "r", 0))                                # a descriptor
    g.hook("os.listdir", (str(temp / "fence/beside"),))
    g.hook("import", ("x", None, [], [], []))
    g.hook("open", (str(temp / "fence/repo/tests/a.txt"), "r", 0))
    g.current = None
    g.hook("os.scandir", (str(temp / "fence"),))
    assert g.take("t1") == [("open", beside), ("open", beside),
                            ("os.listdir", str(temp / "fence/beside"))]
    assert g.take("t1") == []
    assert g.take(None) == [("os.scandir", str(temp / "fence"))]
    assert "data.txt" in _repo_guard.describe([("open", beside)])


def test_guard_is_live_in_this_process(request):
    """The installed guard sees this test list ``/`` (outside every allowed place);
    the record is taken here, so the test itself passes."""
    assert _repo_guard.GUARD is not None and _repo_guard.GUARD.current == request.node.nodeid
    os.listdir("/")
    assert ("os.listdir", "/") in _repo_guard.GUARD.take(request.node.nodeid)


def test_child_processes_import_the_bonsai_under_test(child_env, tmp_path):
    code = "import os, bonsai; print(os.path.dirname(os.path.realpath(bonsai.__file__)))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, cwd=str(tmp_path), env=child_env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == str(bonsai_under_test())


def test_bonsai_under_test_is_the_checkout_or_an_installed_copy():
    """Either the source tree (``python -m pytest`` from the root) or a copy in a
    site-packages directory (``pytest``), never a third place."""
    import site
    here = bonsai_under_test()
    in_checkout = here == REPO_ROOT / "bonsai"
    installed = os.path.realpath(here.parent) in {os.path.realpath(d)
                                                  for d in site.getsitepackages()}
    assert in_checkout or installed, here


def test_demo_runs_from_the_bonsai_under_test(capsys, lgb_example):
    """``python -m bonsai.demo``'s main, with the data shipped inside the package under
    test (an installed copy must carry ``bonsai/data``); its data equals the checkout's."""
    from bonsai import demo
    X, y, Xt, yt = demo.load_binary()
    for got, want in zip((X, y, Xt, yt), lgb_example("binary")):
        np.testing.assert_array_equal(got, want)
    demo.main()
    out = capsys.readouterr().out
    m = re.search(r"^test AUC = (0\.\d{4})", out, re.M)
    assert m and float(m.group(1)) > 0.8, out
