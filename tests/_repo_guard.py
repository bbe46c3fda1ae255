"""The test suite touches no file outside the repository: an audit hook
(``sys.addaudithook``) sees every file the test process opens, lists or scans, and a
test that touched an existing path outside the allowed places fails
(``tests/conftest.py`` turns the records into failures).

Allowed: the repository, the Python installation and its site-packages (imports,
numba's kernel cache next to an installed bonsai), pytest's temporary directories
and the system temporary directory, the system's own files (``/proc``, ``/sys``,
``/dev``, ``/etc``, ``/usr``, ``/lib*``) and per-user cache/config directories
(matplotlib, numba).  When the repository itself lies in the temporary directory
(CI clones into ``mktemp -d``), the directory it was cloned into is not allowed
beside it: nothing next to the clone may be read.  A path that does not exist is
not recorded (a failed probe reads nothing); a symbolic link is judged by its
target.  Files opened by C/C++/Rust code
(pyarrow's or polars' own readers) do not raise audit events and are not seen.
"""
import os
import site
import sys
import tempfile
import threading

_EVENTS = ("open", "os.listdir", "os.scandir")
_SYSTEM = ("/proc", "/sys", "/dev", "/etc", "/usr", "/lib", "/lib32", "/lib64", "/bin",
           "/sbin")
_HOME_DIRS = (".cache", ".config", ".local", ".matplotlib")
_ENV_DIRS = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "MPLCONFIGDIR", "NUMBA_CACHE_DIR")

GUARD = None  # the process's Guard, once install() ran


def _under(path, root):
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def default_allowed():
    """The places outside the repository a test process may touch."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             *site.getsitepackages(), *_SYSTEM}
    user_site = site.getusersitepackages()
    if user_site:
        roots.add(user_site)
    home = os.path.expanduser("~")
    roots.update(os.path.join(home, d) for d in _HOME_DIRS)
    roots.update(os.environ[v] for v in _ENV_DIRS if os.environ.get(v))
    return roots


class Guard:
    """Classify paths and record, per test, the ones touched outside the allowed places.

    repo_root : the repository
    allowed : iterable of directories allowed besides it
    temp_dir : the system temporary directory (allowed, except the part of it that
        holds the repository)
    """

    def __init__(self, repo_root, allowed, temp_dir):
        self.repo = os.path.realpath(repo_root)
        self.allowed = sorted({os.path.realpath(os.path.abspath(r)) for r in allowed})
        self.temp = os.path.realpath(temp_dir)
        self.fenced = None   # the temp-dir entry that holds the repository, if any
        if _under(self.repo, self.temp) and self.repo != self.temp:
            first = os.path.relpath(self.repo, self.temp).split(os.sep)[0]
            self.fenced = os.path.join(self.temp, first)
        self.current = None  # the test being run (a node id), None between tests
        self.records = {}    # node id (or None) -> [(event, path)]
        self._lock = threading.Lock()

    def allow(self, root):
        self.allowed.append(os.path.realpath(os.path.abspath(root)))

    def _allowed(self, p):
        if _under(p, self.repo) or any(_under(p, r) for r in self.allowed):
            return True
        return _under(p, self.temp) and not (self.fenced and _under(p, self.fenced))

    def outside(self, path):
        """True when ``path`` exists and lies outside the allowed places."""
        p = os.path.realpath(os.path.abspath(path))   # a link is judged by its target
        return not self._allowed(p) and os.path.lexists(p)

    def hook(self, event, args):
        if event not in _EVENTS:
            return
        path = args[0] if args else None
        if event != "open" and path is None:
            path = "."
        if isinstance(path, int) or path is None:
            return            # a file descriptor: its open was seen
        try:
            path = os.fsdecode(path)
        except TypeError:
            return
        if self.outside(path):
            with self._lock:
                self.records.setdefault(self.current, []).append((event, os.path.abspath(path)))

    def take(self, nodeid):
        """The records of ``nodeid`` (None: outside any test), forgotten afterwards."""
        with self._lock:
            return self.records.pop(nodeid, [])


def install(repo_root):
    """Start guarding this process (once); returns the Guard."""
    global GUARD
    if GUARD is None:
        GUARD = Guard(repo_root, default_allowed(), tempfile.gettempdir())
        sys.addaudithook(GUARD.hook)
    return GUARD


def describe(records):
    lines = [f"  {event}({path!r})" for event, path in records[:20]]
    if len(records) > 20:
        lines.append(f"  ... and {len(records) - 20} more")
    return ("touched paths outside the repository (tests may read data only from inside "
            "it; see tests/_repo_guard.py):\n" + "\n".join(lines))
