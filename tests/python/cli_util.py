"""What the Python tests of the `sweep` CLI and the programs they run share: where the
binaries are, the environment of a training program (python/ importable), running a
command with its output kept, and reading the canonical run config sweep writes.

BIN_DIR holds sweep and the test programs: the first command-line argument of a test
(ctest passes ${CMAKE_BINARY_DIR}/bin; take_bin_dir removes it), else $SWEEP_BIN_DIR,
else <repo>/build/bin.
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
BIN_DIR = os.environ.get("SWEEP_BIN_DIR") or os.path.join(ROOT, "build", "bin")
TIMEOUT = 300


def take_bin_dir(argv=sys.argv):
    """A test's own BIN_DIR argument, taken out of argv before unittest reads it."""
    global BIN_DIR
    if len(argv) > 1 and not argv[1].startswith("-"):
        BIN_DIR = os.path.abspath(argv.pop(1))


def program_env():
    """The environment of the commands a test runs: python/ (sweep_record) importable."""
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(ROOT, "python"), e.get("PYTHONPATH")) if p)
    return e


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, env=program_env(), **kw)


def sweep(*args):
    return run([os.path.join(BIN_DIR, "sweep")] + list(args))


def show(p):
    return "exit %d\n--- stdout\n%s--- stderr\n%s" % (p.returncode, p.stdout, p.stderr)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def program_run(argv=None):
    """What a test program sweep starts is given: (out, config text, [(dotted key, value)])
    from its --config and --out arguments."""
    args = sys.argv[1:] if argv is None else argv
    config, out = args[args.index("--config") + 1], args[args.index("--out") + 1]
    text, pairs = read_run_config(config)
    return out, text, pairs


def read_run_config(path):
    """(text, [(dotted key, value)]) of the canonical config sweep writes: sections at
    column 0, keys at column 2 (sub-maps deeper are skipped), quoted values unquoted."""
    with open(path, "rb") as f:
        text = f.read().decode()
    pairs, section = [], ""
    for line in text.splitlines():
        if not line.startswith(" "):
            section = line.split(":")[0]
        elif not line.startswith("    "):
            k, v = line.strip().split(": ", 1)
            pairs.append((section + "." + k, v.strip('"')))
    return text, pairs


def probe_result(r):
    """The JSON a page's probe script left in <pre id="probe">, from the DOM headless Chromium
    dumped (`--dump-dom`) into r.stdout; AssertionError when the probe did not run."""
    start = r.stdout.find('<pre id="probe">')
    if start < 0:
        raise AssertionError("the probe did not run: " + show(r))
    text = r.stdout[start + len('<pre id="probe">'):r.stdout.find("</pre>", start)]
    for a, b in (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&amp;", "&")):
        text = text.replace(a, b)
    return json.loads(text)
