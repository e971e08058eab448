#!/usr/bin/python3
"""The HTML report renders in a real browser: headless Chromium (Debian `chromium`) turns
a report of generated records into a non-blank PNG with no console errors, and a grid
value `<script>alert(1)</script>` stays text. A probe script run on a copy of the report
measures the layout Chromium computed: every plot has tick labels on both axes, no SVG
text leaves its SVG, no cell overflows and nothing widens the page. The JSON, CSV and
Markdown formats of the same sweep parse and carry the same counts.

Usage: report_render_test.py BIN_DIR   (needs BIN_DIR/sweep and BIN_DIR/make_records)
Exit 0 pass, 1 fail, 77 skipped (no chromium; containers/install-deps.sh installs it)."""
import csv
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

HOSTILE = "<script>alert(1)</script>"
failures = []


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, **kw)


def chromium_argv(browser, profile):
    # No network, no first-run work, no GPU: the page must render from the file alone.
    return [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage", "--user-data-dir=" + profile, "--enable-logging=stderr", "--v=0"]


def console_errors(stderr):
    """Lines where Chromium reports a page's console output or an uncaught exception."""
    return [l for l in stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l]


def png_distinct_bytes(path):
    """Distinct byte values of the decoded image data: a blank page has only a few."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return 0
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + n]
        pos += 12 + n
    return len(set(zlib.decompress(idat)))


# Runs in Chromium on a copy of the report (the report itself has no script) and writes
# what it measured as JSON into <pre id="probe">.
LAYOUT_PROBE = """<script>
(function () {
  var out = {svgs: 0, no_ticks: [], outside: [], cells_overflow: [],
             page_width: document.documentElement.scrollWidth, window_width: window.innerWidth};
  document.querySelectorAll("svg:not(.swatch)").forEach(function (svg, i) {  // not a legend swatch
    out.svgs++;
    var name = (svg.getAttribute("aria-label") || ("svg " + i)).slice(0, 60);
    var x = svg.querySelectorAll("text.tick.x").length, y = svg.querySelectorAll("text.tick.y").length;
    if (x < 2 || y < 2) out.no_ticks.push(name + " (" + x + " x, " + y + " y ticks)");
    var box = svg.getBoundingClientRect();
    svg.querySelectorAll("text").forEach(function (t) {
      var r = t.getBoundingClientRect();
      if (r.width === 0) return;
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1)
        out.outside.push(name + ": " + t.textContent.slice(0, 40));
    });
  });
  document.querySelectorAll("td, th").forEach(function (c) {
    if (c.scrollWidth > c.clientWidth + 1) out.cells_overflow.push(c.textContent.slice(0, 40));
  });
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


def probe_result(dom):
    """The probe's JSON from a dumped DOM, or None."""
    start = dom.find('<pre id="probe">')
    if start < 0:
        return None
    end = dom.find("</pre>", start)
    text = dom[start + len('<pre id="probe">'):end]
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")
    try:
        return json.loads(text)
    except ValueError:
        return None


def main():
    bin_dir = sys.argv[1]
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        print("SKIP: chromium is not installed (containers/install-deps.sh installs Debian's chromium)")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        sweep_dir = os.path.join(tmp, "render-sweep")
        r = run([os.path.join(bin_dir, "make_records"), "--out", sweep_dir, "--runs", "24", "--steps", "40",
                 "--set-first", "data.path=" + HOSTILE, "--mismatch-step", "20", "--diverged", "1", "--failed", "1"])
        expect(r.returncode == 0, "make_records wrote a sweep: " + r.stderr.strip())
        html_path = os.path.join(tmp, "report.html")
        r = run([os.path.join(bin_dir, "sweep"), "report", sweep_dir, "-o", html_path, "--group-by", "train.lr",
                 "--baseline", "train.clip_norm=0"])
        expect(r.returncode == 0, "sweep report exits 0: " + r.stderr.strip())
        html = open(html_path, encoding="utf-8").read()
        expect("<script" not in html, "the HTML holds no <script element")
        expect("&lt;script&gt;alert(1)&lt;/script&gt;" in html, "the hostile grid value is escaped in the HTML")
        expect("http://" not in html and "https://" not in html, "the HTML fetches nothing")
        expect("NOT IDENTICAL" in html, "the run that leaves its layout twin is flagged")

        # The DOM as Chromium parsed it: the hostile value is a text node, not an element.
        profile = tempfile.mkdtemp(dir=tmp)
        r = run(chromium_argv(browser, profile) + ["--dump-dom", "file://" + html_path])
        expect(r.returncode == 0 and "<h1>" in r.stdout, "chromium --dump-dom parsed the page")
        expect("<script" not in r.stdout, "the parsed DOM has no script element")
        expect("&lt;script&gt;alert(1)&lt;/script&gt;" in r.stdout, "the hostile value is text in the parsed DOM")
        expect(not console_errors(r.stderr), "no console errors: " + "; ".join(console_errors(r.stderr)))

        # Layout as Chromium lays it out: a copy of the report with a script that measures
        # every plot (tick labels on both axes, no text outside its SVG) and the page (no
        # table wider than the page: wide ones scroll inside their box).
        probe_path = os.path.join(tmp, "probe.html")
        with open(probe_path, "w", encoding="utf-8") as f:
            f.write(html.replace("</body>", LAYOUT_PROBE + "</body>"))
        r = run(chromium_argv(browser, tempfile.mkdtemp(dir=tmp)) +
                ["--window-size=1200,1600", "--virtual-time-budget=10000", "--dump-dom", "file://" + probe_path])
        layout = probe_result(r.stdout)
        expect(layout is not None, "the layout probe ran in Chromium")
        if layout:
            expect(layout["svgs"] >= 8, f"the report has its plots ({layout['svgs']} SVGs)")
            expect(not layout["no_ticks"], "every plot has tick labels on both axes: " + "; ".join(layout["no_ticks"]))
            expect(not layout["outside"], "no SVG text outside its SVG: " + "; ".join(layout["outside"][:5]))
            expect(layout["page_width"] <= layout["window_width"],
                   f"nothing widens the page ({layout['page_width']} px in a {layout['window_width']} px window)")
            expect(not layout["cells_overflow"], "no cell text overflows its cell: " + "; ".join(layout["cells_overflow"][:5]))
        expect("Differences against train.clip_norm=0" in html, "--baseline adds the paired differences")
        # The probe must see a text outside its SVG and a plot without ticks, or it proves nothing.
        bad_path = os.path.join(tmp, "bad.html")
        with open(bad_path, "w", encoding="utf-8") as f:
            f.write("<!DOCTYPE html><html><body><svg width=\"100\" height=\"50\"><text x=\"90\" y=\"20\">"
                    "far too long to fit</text></svg>" + LAYOUT_PROBE + "</body></html>")
        r = run(chromium_argv(browser, tempfile.mkdtemp(dir=tmp)) +
                ["--virtual-time-budget=10000", "--dump-dom", "file://" + bad_path])
        bad = probe_result(r.stdout)
        expect(bool(bad and bad["outside"] and bad["no_ticks"]), "the probe catches overflowing text and missing ticks")

        png = os.path.join(tmp, "report.png")
        r = run(chromium_argv(browser, tempfile.mkdtemp(dir=tmp)) +
                ["--screenshot=" + png, "--window-size=1200,1600", "--hide-scrollbars", "file://" + html_path])
        expect(os.path.exists(png) and os.path.getsize(png) > 10000, "screenshot is a PNG of more than 10 kB")
        distinct = png_distinct_bytes(png) if os.path.exists(png) else 0
        expect(distinct > 32, f"screenshot is not blank ({distinct} distinct byte values)")
        expect(not console_errors(r.stderr), "no console errors while rendering")

        # The detector itself must see a console error, or the checks above prove nothing.
        canary = os.path.join(tmp, "canary.html")
        with open(canary, "w") as f:
            f.write("<!DOCTYPE html><html><body><p>x</p><script>undefinedFunction()</script></body></html>")
        r = run(chromium_argv(browser, tempfile.mkdtemp(dir=tmp)) + ["--dump-dom", "file://" + canary])
        expect(bool(console_errors(r.stderr)), "a page with a script error is detected (detector works)")

        # The other formats: valid, and the same counts (24 runs: 23 completed, 1 diverged; 1 failed partial).
        outs = {}
        for fmt in ("json", "csv", "md"):
            r = run([os.path.join(bin_dir, "sweep"), "report", sweep_dir, "--format", fmt, "-o", "-"])
            expect(r.returncode == 0, f"sweep report --format {fmt} exits 0")
            outs[fmt] = r.stdout
        try:
            doc = json.loads(outs["json"])
        except ValueError as e:
            doc = {}
            expect(False, f"JSON parses: {e}")
        s = doc.get("summary", {})
        expect(s.get("runs") == 25 and s.get("completed") == 23 and s.get("diverged") == 1 and s.get("failed") == 1,
               f"JSON summary counts: {s}")
        expect(any(r["values"].get("data.path") == HOSTILE for r in doc.get("runs", [])), "JSON keeps the hostile value as data")
        expect(any(not ls["identical"] for ls in doc.get("layout_sets", [])), "JSON flags the layout mismatch")
        rows = list(csv.reader(io.StringIO(outs["csv"], newline="")))
        expect(len(rows) == 1 + 24 + 1, f"CSV: header + 24 runs + 1 failed run ({len(rows)} rows)")
        expect(len({len(row) for row in rows}) == 1, "CSV rows all have the header's width")
        expect("&lt;script&gt;" in outs["md"] and "<script" not in outs["md"], "Markdown escapes the hostile value")
    print(f"report_render: {'FAILED ' + str(len(failures)) if failures else 'all checks passed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
