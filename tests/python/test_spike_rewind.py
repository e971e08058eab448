"""train.spike_rewind_steps: a step change of the learning rate (3e-3 to 0.3 for the updates
of steps 14-16, test-only fault.spike_lr and fault.spike_steps) is flagged by
train.spike_factor, and each rewind goes back to a state kept in memory from before the
loss began to rise, then skips train.spike_skip global batches of data.

One sweep of a mixture-of-experts model in bf16, a global batch of 12 sequences, no
checkpoints (the states are kept in memory):
- rewind on W=1xA=6, W=2xA=3 and W=3xA=2 (ZeRO 2): the same decisions and the same bits;
  the first loss after the bad update is flagged; every rewind lands on a state from
  before the first update at the changed rate (its checksum is the one recorded there);
  the final loss is within 5% of the run without the step change, which without a policy
  trains on at a loss far above; `sweep reproduce` is bit-for-bit;
- a run that crashed writing a checkpoint after the first rewind, resumed, is the
  straight run: the kept states travel in the checkpoint.
"""

import html.parser
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np
import yaml

import cli_util
from cli_util import show, sweep
from test_spike_policy import read, spike_attrs  # the policy test's record reader: steps, checksums, decisions

MODEL = {"layers": 1, "d_model": 32, "heads": 2, "vocab": 64, "seq_len": 16, "moe": {"experts": 4, "top_k": 2}}
TRAIN = {"steps": 30, "micro_batch": 2, "accum": 6, "lr": 3.0e-3, "schedule": "cosine", "warmup": 2,
         "precision": "bf16", "threads": 1, "log_every": 1}
POLICY = {"train.spike_policy": "rewind", "train.spike_factor": 1.1, "train.spike_window": 8,
          "train.spike_rewind_steps": 6, "train.spike_skip": 2}
STEP_CHANGE = {"fault.spike_step": 14, "fault.spike_lr": 0.3, "fault.spike_steps": 3}
LAYOUTS = {"w1": {"dist.world_size": 1}, "w2": {"dist.world_size": 2, "train.accum": 3, "dist.zero_stage": 2},
           "w3": {"dist.world_size": 3, "train.accum": 2, "dist.zero_stage": 2}}


def write_grid(path, include, train=None, fault=None):
    """The base point (TRAIN with `train`) is a run of the grid too."""
    base = {"model": MODEL, "data": {"kind": "synthetic", "seed": 0, "branching": 4},
            "train": dict(TRAIN, **(train or {})), "fault": fault or {}}
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump({"name": "spike_rewind", "base": base, "include": include}, f)
    return path


def decisions(rec):
    s = rec["summary"]
    return [s["spike_decision.%d" % k] for k in range(1, int(s.get("spike_decisions", "0")) + 1)]


class SpikeRewind(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="spike_rewind_test.")
        cls.out = os.path.join(cls.tmp, "s")
        include = [dict(POLICY, **STEP_CHANGE, **l) for l in LAYOUTS.values()]
        include += [dict(STEP_CHANGE), {"dist.world_size": 1}]  # no policy; no step change
        p = sweep("run", write_grid(os.path.join(cls.tmp, "g.yaml"), include), "--out", cls.out)
        assert p.returncode == 0, show(p)
        cls.records, cls.dirs = {}, {}
        for rid in os.listdir(os.path.join(cls.out, "runs")):
            rec = read(os.path.join(cls.out, "runs", rid, "record.h5"))
            c = rec["config"]
            if c.get("train.spike_policy") == "rewind":
                name = "w" + c["dist.world_size"]
            else:
                name = "damaged" if "fault.spike_step" in c else "clean"
            cls.records[name], cls.dirs[name] = rec, os.path.join(cls.out, "runs", rid)
        assert sorted(cls.records) == ["clean", "damaged", "w1", "w2", "w3"], sorted(cls.records)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_the_spike_is_flagged_and_each_rewind_goes_back_before_the_rise(self):
        r = self.records["w1"]
        ds = decisions(r)
        self.assertGreaterEqual(len(ds), 1, r["summary"])
        self.assertTrue(ds[0].startswith("step 15: the loss spiked to "), ds[0])
        for d in ds:
            # "rewound to the state after step P, before the rise from step R, ..."
            back_to = int(d.split("rewound to the state after step ")[1].split(",")[0])
            rise = int(d.split("before the rise from step ")[1].split(",")[0])
            step = int(d.split(":")[0].split()[1])
            self.assertLess(back_to, 14, d)  # before the first update at the changed rate
            self.assertLess(back_to, rise - 1, d)  # the loss of the state gone back to had not risen
            self.assertTrue(d.endswith("; the next 2 global batches of data skipped"), d)
            # The parameters after the decision's step are the ones recorded after back_to.
            self.assertEqual(r["checksum"][step], r["checksum"][back_to], d)
        self.assertEqual(r["summary"]["nonfinite_steps_skipped"], "0")

    def test_the_run_recovers_where_no_policy_does_not(self):
        clean, rewound, damaged = (self.records[k]["loss"][-1] for k in ("clean", "w1", "damaged"))
        self.assertLess(abs(rewound - clean), 0.05 * clean, (rewound, clean))
        self.assertGreater(damaged, 1.5 * clean, (damaged, clean))
        self.assertEqual(spike_attrs(self.records["damaged"]), {})

    def test_every_layout_decides_alike_and_gives_the_same_bits(self):
        one = self.records["w1"]
        for name in ("w2", "w3"):
            r = self.records[name]
            self.assertTrue(np.array_equal(one["loss"].view(np.uint64), r["loss"].view(np.uint64)), name)
            self.assertEqual(one["checksum"], r["checksum"], name)
            self.assertEqual(one["skipped"].tolist(), r["skipped"].tolist(), name)
            self.assertEqual(spike_attrs(one), spike_attrs(r), name)

    def test_reproduce_replays_the_decisions(self):
        p = sweep("reproduce", self.dirs["w3"])
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("reproduced bit-for-bit: 30 steps", p.stdout)

    def test_the_report_marks_each_decision_on_the_loss_curves(self):
        """report.html's loss chart has a shaded mark per decision, titled with its run and
        sentence; the run page of a served sweep draws the same (run_page_html.cpp)."""
        class Marks(html.parser.HTMLParser):
            def __init__(self):
                super().__init__()
                self.depth, self.in_title, self.titles, self.rects = 0, False, [], 0

            def handle_starttag(self, tag, attrs):
                if tag == "g" and ("class", "spike") in attrs:
                    self.depth = 1
                    self.titles.append("")
                elif self.depth and tag == "g":
                    self.depth += 1
                self.in_title = self.depth > 0 and tag == "title"
                self.rects += self.depth > 0 and tag == "rect"

            def handle_endtag(self, tag):
                if self.depth and tag == "g":
                    self.depth -= 1
                self.in_title = False

            def handle_data(self, data):
                if self.in_title:
                    self.titles[-1] += data

        with open(os.path.join(self.out, "report.html"), encoding="utf-8") as f:
            marks = Marks()
            marks.feed(f.read())
        want = []
        for name in ("w1", "w2", "w3"):
            rid = os.path.basename(self.dirs[name])
            want += ["run %s: %s" % (rid, d) for d in decisions(self.records[name])]
        self.assertTrue(want)
        self.assertEqual(sorted(marks.titles), sorted(want))
        self.assertEqual(marks.rects, len(want))  # each a rewind: a shaded stretch

    def test_a_run_resumed_after_the_first_rewind_is_the_straight_run(self):
        out = os.path.join(self.tmp, "crashed")
        train = dict({k.split(".")[1]: v for k, v in POLICY.items()}, checkpoint_every=8, keep_checkpoints=10)
        fault = dict({k.split(".")[1]: v for k, v in STEP_CHANGE.items()}, crash_in_checkpoint_step=24)
        g = write_grid(os.path.join(self.tmp, "crashed.yaml"), [LAYOUTS["w1"]], train, fault)
        p = sweep("run", g, "--out", out)
        self.assertEqual(p.returncode, 1, show(p))
        (rid,) = os.listdir(os.path.join(out, "runs"))
        p = sweep("resume", os.path.join(out, "runs", rid), "--world-size", "2")
        self.assertEqual(p.returncode, 0, show(p))
        (nid,) = set(os.listdir(os.path.join(out, "runs"))) - {rid}
        r = read(os.path.join(out, "runs", nid, "record.h5"))
        one = self.records["w1"]
        self.assertTrue(np.array_equal(one["loss"].view(np.uint64), r["loss"].view(np.uint64)))
        self.assertEqual(one["checksum"], r["checksum"])
        self.assertEqual(spike_attrs(one), spike_attrs(r))


if __name__ == "__main__":
    cli_util.take_bin_dir()
    unittest.main(verbosity=2)
