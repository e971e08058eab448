#!/usr/bin/python3
"""`sweep serve` as a reader uses it, with the real `sweep`, sweep-train and headless
Chromium (Debian `chromium`), while a real small sweep trains:

- the sweep page, left open in Chromium (a virtual-time budget; the page's long polls of
  status.json hold virtual time while they wait, so real time passes and the sweep goes
  on), has its counts and a running run's step written in place by its script: updated
  at least twice without a reload, to values past what status.json said before the page
  opened, and a running run's step in the report's table past the step the served report
  holds;
- the page of a run that trains, left open in Chromium, has its step written in place by
  its script, past the step the served page held; once the run has ended its page has no
  script and its status.json says it no longer runs;
- Ctrl-C in the middle of a report build (slowed by the tests' hook,
  SWEEP_TEST_SERVE_BUILD_PAUSE_MS) ends the server within 2 s, exit 0, with no file left
  half-written in the sweep directory;
- a run page of a program's run shows a chart for every eval and custom metric curve the
  record holds (loss, eval_loss, accuracy, eval_accuracy) and of sweep-train's run the
  telemetry (lr, grad_norm, tokens_per_s, step_time_s);
- the page of a run that trains has a progress row (step N of M, the time into its
  attempt) that its script rewrites from the run's status.json, past the served one;
- the compare page names the first differing step of two runs of other seeds and says
  identical of two that differ only in train.log_every; across two served sweeps
  (/compare?a=SWEEP/ID&b=SWEEP/ID, in Chromium) it says identical of the same run in each
  and names the step `sweep compare` names of two that differ;
- a path outside the served directories is refused: '..', percent-encoded '..', a run
  directory that is a symbolic link, a record that is one; compare's SWEEP/ID too (a
  path in any spelling, a linked run); only GET; a Host that is not
  the loopback's; bound to another address, no page without the token;
- a sweep of 1,100 records (make_records) is counted whole, but its page lists the ~1,000
  runs the report lists one by one (kHtmlRuns), not every one;
- bad input, one line on stderr and exit 2: a directory that is not a sweep's, a port in use.

Usage: serve_test.py BIN_DIR   (needs BIN_DIR/sweep, sweep-train and make_records)
Exit 0 pass, 1 fail, 77 skipped (no chromium; containers/install-deps.sh installs it)."""
import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
failures = []

# A program of its own (numpy only) that logs a custom metric and evaluations with one.
PROGRAM = r'''
import numpy as np
import sweep
settings = {"steps": 30, "lr": 0.05}
run = sweep.init(settings)
rng = np.random.default_rng(0)
x = rng.standard_normal((64, 8)).astype(np.float32)
y = x @ np.arange(8, dtype=np.float32)
w = np.zeros(8, dtype=np.float32)
run.watch([("w", w)], every=5)
for step in range(1, settings["steps"] + 1):
    err = x @ w - y
    loss = float(np.mean(err * err))
    w -= np.float32(settings["lr"]) * (np.float32(2.0 / len(x)) * (x.T @ err))
    run.log(step, loss, lr=settings["lr"], tokens=len(x), accuracy=1.0 / (1.0 + loss))
    if step % 10 == 0:
        run.eval(step, loss * 1.1, len(x), accuracy=0.9 / (1.0 + loss))
run.finish()
'''

# Quick start's model, slowed so that a run trains for ~15 s: one run at a time, so the
# counts advance while the page is open, and one run outlasts the page's few seconds. Runs that differ only in train.log_every train
# the same bits.
LIVE = {"name": "live", "launch": {"parallel": 1},
        "base": {"model": {"layers": 2, "d_model": 64, "heads": 4, "vocab": 256, "seq_len": 32},
                 "data": {"kind": "synthetic", "seed": 0, "branching": 4, "eval_fraction": 0.05},
                 "train": {"steps": 200, "micro_batch": 8, "accum": 2, "lr": 3.0e-3, "threads": 1,
                           "eval_every": 20, "eval_batches": 1},
                 "fault": {"slow_ms": 70}},
        "grid": {"train.log_every": [5, 10], "train.seed": [0, 1]}}


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(ROOT, "python"), e.get("PYTHONPATH")) if p)
    return e


def run(argv, timeout=300):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env())


def chromium_argv(browser, profile):
    return [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage", "--user-data-dir=" + profile, "--enable-logging=stderr", "--v=0"]


def console_errors(stderr):
    return [l for l in stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l]


def get(port, path, headers=None, method="GET"):
    """(status, headers, body) of one request, the path sent exactly as given."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    h = {"Host": "127.0.0.1:%d" % port}
    h.update(headers or {})
    for k, v in h.items():
        c.putheader(k, v)
    c.endheaders()
    r = c.getresponse()
    body = r.read().decode("utf-8", "replace")
    c.close()
    return r.status, dict(r.getheaders()), body


def start_server(bin_dir, dirs, *extra):
    """A `sweep serve` on a free port: (process, port, first line)."""
    p = subprocess.Popen([os.path.join(bin_dir, "sweep"), "serve", *dirs, "--port", "0", *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready, _, _ = select.select([p.stdout], [], [], 60)
    line = p.stdout.readline() if ready else ""
    m = re.search(r"http://[^:]+:(\d+)/", line)
    return p, int(m.group(1)) if m else 0, line


def wait_for(what, probe, timeout=120, every=0.3):
    end = time.time() + timeout
    while time.time() < end:
        got = probe()
        if got:
            return got
        time.sleep(every)
    expect(False, "waited for " + what)
    return None


def status(port, name):
    code, _, body = get(port, "/s/%s/status.json" % name)
    return json.loads(body) if code == 200 else None


def dom_text(dom, element_id):
    m = re.search(r'id="%s"[^>]*>([^<]*)<' % re.escape(element_id), dom)
    return m.group(1) if m else None


def check_live_page(browser, tmp, port):
    """The sweep page in Chromium while the sweep trains: updated in place."""
    # A run early in its steps, and a report that has its row (a span its script advances).
    def early():
        s = status(port, "live") or {}
        page = get(port, "/s/live/")[2]
        return s if any(0 < r["step"] <= 40 and ('data-run="%s"' % r["id"]) in page for r in s.get("running", [])) else None

    before = wait_for("a run early in its steps in the report", early, timeout=240, every=0.2)
    running = {r["id"]: r["step"] for r in before["running"]}
    served = get(port, "/s/live/")[2]
    t0 = time.time()
    r = run(chromium_argv(browser, tempfile.mkdtemp(dir=tmp)) +
            ["--virtual-time-budget=5000", "--dump-dom", "http://127.0.0.1:%d/s/live/" % port])
    dom = r.stdout
    print("     (Chromium held the page %.1f s)" % (time.time() - t0))
    expect(r.returncode == 0 and 'id="report"' in dom, "Chromium opened the sweep page")
    expect(not console_errors(r.stderr), "no console errors: " + "; ".join(console_errors(r.stderr)))
    updates = int(dom_text(dom, "live-updates") or 0)
    # The first answer comes at once, every later one only when the status changed: two
    # or more mean the page took a change in place.
    expect(updates >= 2, "the page applied %d status updates without a reload" % updates)
    counts = dom_text(dom, "live-counts") or ""
    completed = int((re.search(r"(\d+) completed", counts) or [0, 0])[1])
    steps = {m[0]: int(m[1]) for m in re.findall(r"([0-9a-f]{16}) at step (-?\d+) of", dom_text(dom, "live-running") or "")}
    advanced = completed > before["counts"]["completed"] or any(
        s > running.get(i, s) for i, s in steps.items()) or (steps and not set(steps) & set(running))
    expect(advanced, "the counts or a running run's step advanced past status.json's before the page opened "
                     "(%s, %s; before %s, %s)" % (counts, steps, before["counts_text"], running))
    # A running run's step in the report's table: written by the script, past the report's own.
    cells = dict(re.findall(r'<span class="step" data-run="([0-9a-f]{16})">(\d+)</span>', dom))
    own = dict(re.findall(r'<span class="step" data-run="([0-9a-f]{16})">(\d+)</span>', served))
    moved = [i for i in cells if i in own and int(cells[i]) > int(own[i])]
    expect(bool(moved), "a running run's step in the report table advanced in place (%s; served %s)" % (cells, own))
    expect("<script" not in served.split('id="report"')[1].split("</div>\n<script")[0],
           "the report itself holds no script; the page's one script comes after it")
    expect("http://" not in served and "https://" not in served, "the page fetches nothing from the network")
    return check_live_run_page(browser, tmp, port)


def check_live_run_page(browser, tmp, port):
    """The page of a run that trains, in Chromium: its step advanced in place. Returns its id."""
    def early_run():
        for r in (status(port, "live") or {}).get("running", []):
            if 0 < r["step"] <= 120:
                page = get(port, "/s/live/run/" + r["id"])[2]
                if 'id="run-step"' in page:
                    return r["id"], page
        return None

    rid, served = wait_for("a run that trains with steps to go", early_run, timeout=240, every=0.2)
    own = int(dom_text(served, "run-step") or -1)
    served_progress = progress_row(served)
    expect(re.fullmatch(r"step \d+ of 200, advancing, (\d+m)?\d+s into attempt 1", served_progress),
           "the served page's progress row says the step of the steps and the time into the attempt: " +
           repr(served_progress))
    code, _, body = get(port, "/s/live/run/%s/status.json" % rid)
    st = json.loads(body) if code == 200 else {}
    expect(st.get("running") and st.get("elapsed_s", -1) >= 0 and st.get("attempt") == 1 and
           st.get("progress", "").startswith("step %d of 200" % st.get("step", -2)),
           "its status.json has the elapsed time and the progress words: " + body.strip())
    r = run(chromium_argv(browser, tempfile.mkdtemp(dir=tmp)) +
            ["--virtual-time-budget=5000", "--dump-dom", "http://127.0.0.1:%d/s/live/run/%s" % (port, rid)])
    dom = r.stdout
    expect(r.returncode == 0 and 'id="run"' in dom and not console_errors(r.stderr),
           "Chromium opened the running run's page, no console errors: " + "; ".join(console_errors(r.stderr)))
    step = int(dom_text(dom, "run-step") or -1)
    updates = int(dom_text(dom, "run-updates") or 0)
    expect(updates >= 2 and step > own, "the run's step advanced in place: %d -> %d in %d updates" % (own, step, updates))
    # The progress, written in place from status.json: the step the page shows now, past the
    # served one, and the time into the attempt. The live line's (kept when the run ends
    # while the page is open and its part is swapped for the final page's), and the show
    # table's row while it still trains.
    shown = dom_text(dom, "run-progress") or ""
    m = re.fullmatch(r"step (\d+) of 200, advancing, (?:\d+m)?\d+s into attempt 1", shown)
    expect(m is not None and int(m.group(1)) > own and int(m.group(1)) == step,
           "the progress advanced in place: %r -> %r" % (served_progress, shown))
    if dom_text(dom, "run-state") == "training":
        expect(progress_row(dom) == shown, "and the progress row says the same: %r" % progress_row(dom))
    else:
        print("     (the run ended while its page was open: its row is the final page's)")
    return rid


def progress_row(html):
    m = re.search(r'<tr data-key="progress">.*?<td[^>]*>[^<]*</td>\s*<td[^>]*>([^<]*)</td>', html, re.S)
    return m.group(1) if m else ""


def check_stop_during_build(bin_dir, live_dir):
    """Ctrl-C while a report build runs (slowed to 1.5 s a run by the tests' hook)."""
    def leftovers():
        return sorted(os.path.join(d, f) for d, _, fs in os.walk(live_dir) for f in fs
                      if ".tmp" in f or f.endswith(".partial"))

    before = leftovers()
    os.environ["SWEEP_TEST_SERVE_BUILD_PAUSE_MS"] = "1500"
    try:
        p, port, line = start_server(bin_dir, [live_dir])
    finally:
        del os.environ["SWEEP_TEST_SERVE_BUILD_PAUSE_MS"]
    get(port, "/s/live/")  # asks for the report: its build starts after the first scan
    wait_for("the first scan", lambda: (status(port, "live") or {}).get("ready"), timeout=60)
    time.sleep(1)
    building = (status(port, "live") or {}).get("report") == 0
    expect(building, "the report build is under way (no report yet)")
    t0 = time.time()
    p.send_signal(signal.SIGINT)
    try:
        rc = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
    took = time.time() - t0
    expect(rc == 0 and took < 2, "Ctrl-C during a report build stops the server within 2 s, exit 0 (%.2f s, %s)"
           % (took, rc))
    expect(leftovers() == before, "and leaves nothing half-written: %s" % leftovers())


def check_pages(bin_dir, browser, tmp, port, live_dir, metrics_dir, live_run):
    """Run pages and compare pages, once the live sweep has ended."""
    code, _, html = get(port, "/s/live/run/" + live_run)
    expect(code == 200 and "data-run-status" not in html and "<script" not in html,
           "the run page of a run that has ended has no script")
    code, _, body = get(port, "/s/live/run/%s/status.json" % live_run)
    expect(code == 200 and json.loads(body).get("running") is False, "its status.json says it runs no more: " + body)
    mid = os.listdir(os.path.join(metrics_dir, "runs"))[0]
    code, _, html = get(port, "/s/metrics/run/" + mid)
    expect(code == 200, "the run page of the program's run answers 200")
    curves = set(re.findall(r'<section class="curve" data-curve="([^"]+)">', html))
    for name in ("loss", "eval_loss", "accuracy", "eval_accuracy"):
        expect(name in curves, "the run page draws %s (%s)" % (name, sorted(curves)))
    for section in re.findall(r'<section class="curve"[^>]*>(.*?)</section>', html, re.S):
        expect("<svg" in section, "each curve section has its chart")
        break
    r = run(chromium_argv(browser, tempfile.mkdtemp(dir=tmp)) +
            ["--dump-dom", "http://127.0.0.1:%d/s/metrics/run/%s" % (port, mid)])
    expect(r.returncode == 0 and r.stdout.count("<svg") >= 4 and not console_errors(r.stderr),
           "Chromium renders the run page, its charts, no console errors")

    points = [l.split("\t") for l in open(os.path.join(live_dir, "points.tsv")).read().splitlines()[1:]]
    by = {v: i for i, v in points}
    a, b = by["train.log_every=5 train.seed=0"], by["train.log_every=10 train.seed=0"]
    c = by["train.log_every=5 train.seed=1"]
    code, _, html = get(port, "/s/live/run/" + a)
    curves = set(re.findall(r'data-curve="([^"]+)"', html))
    for name in ("loss", "eval_loss", "lr", "grad_norm", "tokens_per_s", "step_time_s"):
        expect(name in curves, "sweep-train's run page draws %s" % name)
    expect('id="config"' in html and 'id="environment"' in html and 'id="log"' in html,
           "the run page has its config, environment and log tail")
    code, _, html = get(port, "/s/live/compare?a=%s&b=%s" % (a, b))
    expect(code == 200 and "identical: no step differs" in html and "identical bit-for-bit" in html,
           "compare says identical of runs that differ only in train.log_every")
    expect("train.log_every" in html, "and names the config key they differ in")
    code, _, html = get(port, "/s/live/compare?a=%s&b=%s" % (a, c))
    m = re.search(r'id="first-difference">first differing step: (\d+)<', html)
    expect(code == 200 and m is not None, "compare names the first differing step of two seeds")
    cli = run([os.path.join(bin_dir, "sweep"), "compare", os.path.join(live_dir, "runs", a),
               os.path.join(live_dir, "runs", c)])
    expect(m is not None and ("diverged at step %s:" % m.group(1)) in cli.stdout,
           "the same step `sweep compare` names: " + cli.stdout.splitlines()[2] if cli.stdout.count("\n") > 2 else "")


def check_cross_compare(bin_dir, browser, tmp, port, metrics_dir, other_dir):
    """Two runs of two served sweeps on one compare page, in Chromium."""
    mid = os.listdir(os.path.join(metrics_dir, "runs"))[0]
    points = [l.split("\t") for l in open(os.path.join(other_dir, "points.tsv")).read().splitlines()[1:]]
    by = {v: i for i, v in points}
    same, other = by["train.lr=0.05"], by["train.lr=0.04"]
    code, _, index = get(port, "/")
    expect('action="/compare"' in index, "the index has a form comparing runs of any served sweeps")
    r = run(chromium_argv(browser, tempfile.mkdtemp(dir=tmp)) +
            ["--dump-dom", "http://127.0.0.1:%d/compare?a=metrics/%s&b=metrics2/%s" % (port, mid, same)])
    expect(r.returncode == 0 and "identical: no step differs" in r.stdout and not console_errors(r.stderr),
           "Chromium: compare across two sweeps says identical of the same run in each")
    expect("metrics/" + mid in r.stdout and "metrics2/" + same in r.stdout, "and names each run with its sweep")
    r = run(chromium_argv(browser, tempfile.mkdtemp(dir=tmp)) +
            ["--dump-dom", "http://127.0.0.1:%d/compare?a=metrics/%s&b=metrics2/%s" % (port, mid, other)])
    m = re.search(r'id="first-difference">first differing step: (\d+)<', r.stdout)
    cli = run([os.path.join(bin_dir, "sweep"), "compare", os.path.join(metrics_dir, "runs", mid),
               os.path.join(other_dir, "runs", other)])
    expect(m is not None and ("diverged at step %s:" % m.group(1)) in cli.stdout,
           "Chromium: compare across two sweeps names the first differing step `sweep compare` names (%s; %s)"
           % (m and m.group(1), cli.stdout.splitlines()[:3]))
    code, _, html = get(port, "/s/metrics/compare?a=%s&b=metrics2/%s" % (mid, other))
    expect(code == 200 and m is not None and ('first differing step: %s<' % m.group(1)) in html,
           "a sweep's compare page takes a run of another served sweep as SWEEP/ID (%d)" % code)


def check_refusals(bin_dir, port, metrics_dir, tmp):
    mid = os.listdir(os.path.join(metrics_dir, "runs"))[0]
    for path in ("/s/metrics/../../../etc/passwd", "/s/metrics/run/..%2F..%2F..%2Fetc", "/s/metrics/run/%2e%2e",
                 "/s/metrics/run/..", "/s/..%2fmetrics/", "/%2e%2e/%2e%2e/etc/passwd"):
        code, _, body = get(port, path)
        expect(code in (403, 404) and "root:" not in body, "%s is refused (%d)" % (path, code))
    # A run directory that is a symbolic link to a run elsewhere, and a record that is one.
    outside = os.path.join(tmp, "outside")
    shutil.copytree(os.path.join(metrics_dir, "runs", mid), outside)
    os.symlink(outside, os.path.join(metrics_dir, "runs", "linked"))
    code, _, _ = get(port, "/s/metrics/run/linked")
    expect(code == 403, "a run directory that is a symbolic link is refused (%d)" % code)
    planted = os.path.join(metrics_dir, "runs", "planted")
    os.makedirs(planted)
    os.symlink(os.path.join(outside, "record.h5"), os.path.join(planted, "record.h5"))
    code, _, _ = get(port, "/s/metrics/run/planted")
    expect(code == 403, "a record that is a symbolic link is refused (%d)" % code)
    code, _, _ = get(port, "/s/metrics/compare?a=%s&b=linked" % mid)
    expect(code == 403, "and so is comparing with it (%d)" % code)
    # Compare's SWEEP/ID names a served sweep by its served name: no path of any spelling
    # leads out (the query is percent-decoded before it is read), nor does a linked run.
    for query, want in (("a=../metrics/%s&b=metrics/%s", 403), ("a=metrics/../metrics/%s&b=metrics/%s", 403),
                        ("a=..%%2Fmetrics%%2F%s&b=metrics/%s", 403), ("a=%%2e%%2e/%s&b=metrics/%s", 403),
                        ("a=metrics/%%2e%%2e&b=metrics/%s", 404), ("a=%%2Fetc%%2Fpasswd&b=metrics/%s", 403),
                        ("a=metrics/runs%%2F%s&b=metrics/%s", 403), ("a=metrics/linked&b=metrics/%s", 403),
                        ("a=metrics/planted&b=metrics/%s", 403), ("a=nosuch/%s&b=metrics/%s", 404),
                        ("a=%s&b=metrics/%s", 400)):
        q = query % ((mid,) * query.count("%s"))
        for path in ("/compare?" + q, "/s/metrics/compare?" + q):
            code, _, body = get(port, path)
            ok = code == want or (path.startswith("/s/") and want == 400 and code == 200)  # a bare id is the sweep's own
            expect(ok and "root:" not in body, "%s is refused (%d)" % (path, code))
    code, hdr, _ = get(port, "/", method="POST")
    expect(code == 405 and "GET" in hdr.get("Allow", ""), "POST is refused: read-only (%d)" % code)
    code, _, _ = get(port, "/", headers={"Host": "evil.example:%d" % port})
    expect(code == 403, "a Host that is not the loopback's is refused (%d)" % code)
    code, hdr, _ = get(port, "/")
    csp = hdr.get("Content-Security-Policy", "")
    expect(code == 200 and "default-src 'none'" in csp and "script-src 'nonce-" in csp,
           "pages come with a policy that admits nothing from the network")

    # Bound to another address: nothing without the token it printed.
    p, tport, line = start_server(bin_dir, [metrics_dir], "--bind", "0.0.0.0")
    token = (re.search(r"\?token=([0-9a-f]+)", line) or [None, ""])[1]
    try:
        expect(tport > 0 and len(token) == 32, "bound to 0.0.0.0 it prints a token: " + line.strip())
        code, _, _ = get(tport, "/")
        expect(code == 401, "no page without the token (%d)" % code)
        code, _, _ = get(tport, "/?token=" + "0" * 32)
        expect(code == 401, "nor with a wrong one (%d)" % code)
        code, hdr, _ = get(tport, "/?token=" + token)
        cookie = hdr.get("Set-Cookie", "").split(";")[0]
        expect(code == 200 and cookie == "sweep_token=" + token, "the token opens it and sets the cookie")
        code, _, _ = get(tport, "/s/metrics/", headers={"Cookie": cookie})
        expect(code == 200, "the cookie opens the other pages (%d)" % code)
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(timeout=60)


def check_big_sweep(bin_dir, tmp):
    """A sweep past the report's kHtmlRuns (1,000): the served page lists the best runs, not
    every one, and says how many it shows; the index and status.json count every run."""
    big = os.path.join(tmp, "big")
    n = 1100
    r = run([os.path.join(bin_dir, "make_records"), "--out", big, "--runs", str(n), "--steps", "5"])
    expect(r.returncode == 0, "make_records wrote %d records: %s" % (n, r.stderr.strip()[-200:]))
    p, port, _ = start_server(bin_dir, [big])
    try:
        get(port, "/s/big/")  # asks for the report
        st = wait_for("the big sweep's report", lambda: (lambda s: s if s and s.get("report", 0) > 0 else None)(
            status(port, "big")), timeout=300)
        expect(st is not None and st["total"] == n and st["counts"]["completed"] == n,
               "status.json counts every run of the big sweep: %s" % (st or {}).get("counts_text"))
        code, _, html = get(port, "/s/big/")
        shown = re.search(r"(\d+) of %d runs shown" % n, html)
        linked = set(re.findall(r'href="/s/big/run/([0-9a-f]{16})"', html))
        expect(code == 200 and shown is not None and 1000 <= int(shown.group(1)) < n and
               1000 <= len(linked) < n, "the page of %d runs lists %s of them (%d run links), not every one"
               % (n, shown and shown.group(1), len(linked)))
        expect(("%d completed" % n) in get(port, "/")[2], "the index counts all %d" % n)
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(timeout=60)


def check_bad_input(bin_dir, tmp, metrics_dir):
    plain = os.path.join(tmp, "plain")
    os.makedirs(plain)
    open(os.path.join(plain, "notes.txt"), "w").write("x")
    r = run([os.path.join(bin_dir, "sweep"), "serve", plain, "--port", "0"], timeout=60)
    expect(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "not a sweep directory" in r.stderr
           and r.stdout == "", "a directory that is not a sweep's: exit 2, one line: " + r.stderr.strip())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        taken = s.getsockname()[1]
        r = run([os.path.join(bin_dir, "sweep"), "serve", metrics_dir, "--port", str(taken)], timeout=60)
    expect(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "in use" in r.stderr and r.stdout == "",
           "a port in use: exit 2, one line: " + r.stderr.strip())


def main():
    bin_dir = os.path.abspath(sys.argv[1])
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        print("SKIP: chromium is not installed (containers/install-deps.sh installs Debian's chromium)")
        return 77
    with tempfile.TemporaryDirectory(prefix="serve_test.") as tmp:
        script = os.path.join(tmp, "metrics.py")
        open(script, "w").write(PROGRAM)
        grid = {"name": "metrics", "program": {"argv": ["/usr/bin/python3", script], "kind": "tiny-linreg",
                                               "pass_args": False},
                "base": {"train": {"steps": 30, "threads": 1, "lr": 0.05}}}
        metrics_dir = os.path.join(tmp, "metrics")
        yaml.safe_dump(grid, open(os.path.join(tmp, "metrics.yaml"), "w"))
        r = run([os.path.join(bin_dir, "sweep"), "run", os.path.join(tmp, "metrics.yaml"), "--out", metrics_dir])
        expect(r.returncode == 0, "the program's sweep ran: " + r.stderr.strip()[-300:])
        check_bad_input(bin_dir, tmp, metrics_dir)
        check_big_sweep(bin_dir, tmp)
        # The same program in another sweep: one run the same as metrics', one of another lr.
        other = dict(grid, name="metrics2", grid={"train.lr": [0.05, 0.04]})
        other_dir = os.path.join(tmp, "metrics2")
        yaml.safe_dump(other, open(os.path.join(tmp, "metrics2.yaml"), "w"))
        r = run([os.path.join(bin_dir, "sweep"), "run", os.path.join(tmp, "metrics2.yaml"), "--out", other_dir])
        expect(r.returncode == 0, "the program's second sweep ran: " + r.stderr.strip()[-300:])

        live_dir = os.path.join(tmp, "live")
        yaml.safe_dump(LIVE, open(os.path.join(tmp, "live.yaml"), "w"))
        driver = subprocess.Popen([os.path.join(bin_dir, "sweep"), "run", os.path.join(tmp, "live.yaml"), "--out",
                                   live_dir, "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env())
        server = None
        try:
            wait_for("the live sweep's points", lambda: os.path.exists(os.path.join(live_dir, "points.tsv")))
            server, port, line = start_server(bin_dir, [live_dir, metrics_dir, other_dir])
            expect(port > 0 and "3 sweeps at http://127.0.0.1:" in line, "sweep serve started: " + line.strip())
            code, _, index = get(port, "/")
            expect(code == 200 and 'href="/s/live/"' in index and 'href="/s/metrics/"' in index,
                   "the index lists both sweeps")
            live_run = check_live_page(browser, tmp, port)
            expect(driver.wait(timeout=600) == 0, "the live sweep completed")
            wait_for("the index to count 4 completed runs",
                     lambda: "4 completed" in get(port, "/")[2], timeout=60)
            check_pages(bin_dir, browser, tmp, port, live_dir, metrics_dir, live_run)
            check_cross_compare(bin_dir, browser, tmp, port, metrics_dir, other_dir)
            check_refusals(bin_dir, port, metrics_dir, tmp)
            check_stop_during_build(bin_dir, live_dir)
        finally:
            if driver.poll() is None:
                driver.send_signal(signal.SIGINT)
                driver.wait(timeout=120)
            if server:
                server.send_signal(signal.SIGINT)
                expect(server.wait(timeout=60) == 0, "Ctrl-C stops the server, exit 0")
    print("serve: " + ("FAILED %d" % len(failures) if failures else "all checks passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
