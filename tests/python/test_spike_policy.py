"""train.spike_policy: a planted loss spike (a learning rate of 1 for the update of step 14,
test-only fault.spike_step) is decided on before step 15's update, the same on every layout.

One sweep of a mixture-of-experts model in bf16, a global batch of 12 sequences, a
checkpoint every 4 steps:
- rewind on 1 rank, on 2 ranks with ZeRO 2 and on 3 ranks with ZeRO 2: the loss of step 15
  spikes, the run goes back to the state after step 12 (its parameter checksum after step
  15 is the one after step 12), leaves out the global batches of steps 13-15, and trains on;
  the three records are bit for bit one (losses, checksums, the decision, the samples left
  out), `sweep reproduce` reproduces it, and a run that crashed after the rewind continues
  (in place, and on another layout) to the same bits: the decision and the undone updates
  survive the checkpoint;
- none: the same rows to step 15, then the damaged run goes on; flagged only;
- skip: steps 15, 16, 17 leave out their update (train.spike_limit 3), then only flagged.
Refused: rewind without checkpoints.
"""

import json
import os
import shutil
import sys
import tempfile
import unittest

import h5py
import numpy as np
import yaml

import cli_util
from cli_util import show, sweep

sys.path.insert(0, os.path.join(cli_util.ROOT, "python"))
from sweep_record.digest import record_digest, stored_digest  # noqa: E402

MODEL = {"layers": 1, "d_model": 32, "heads": 2, "vocab": 64, "seq_len": 16, "moe": {"experts": 4, "top_k": 2}}
TRAIN = {"steps": 24, "micro_batch": 2, "accum": 6, "lr": 3.0e-3, "schedule": "cosine", "warmup": 2,
         "precision": "bf16", "checkpoint_every": 4, "keep_checkpoints": 10, "threads": 1, "log_every": 1,
         "spike_policy": "rewind"}
LAYOUTS = {"w1": {"dist.world_size": 1}, "w2": {"dist.world_size": 2, "train.accum": 3, "dist.zero_stage": 2},
           "w3": {"dist.world_size": 3, "train.accum": 2, "dist.zero_stage": 2}}


def write_grid(path, name, include, train=None, fault=None):
    base = {"model": MODEL, "data": {"kind": "synthetic", "seed": 0, "branching": 4},
            "train": dict(TRAIN, **(train or {})), "fault": dict({"spike_step": 14}, **(fault or {}))}
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump({"name": name, "base": base, "include": include}, f)
    return path


def read(path):
    with h5py.File(path, "r") as f:
        m = {k: f["metrics"][k][:] for k in ("step", "loss", "skipped")}
        ck = f["checksums"]
        m["checksum"] = dict(zip(ck["step"][:].tolist(), ck["params"][:].tolist()))
        m["summary"] = {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in f["summary"].attrs.items()}
        m["config"] = dict(zip((k.decode() for k in f["config/keys"][:]), (v.decode() for v in f["config/values"][:])))
    return m


def spike_attrs(rec):
    return {k: v for k, v in rec["summary"].items() if k.startswith("spike_")}


class SpikePolicy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="spike_policy_test.")
        cls.out = os.path.join(cls.tmp, "s")
        include = list(LAYOUTS.values()) + [{"train.spike_policy": "none"}, {"train.spike_policy": "skip"}]
        p = sweep("run", write_grid(os.path.join(cls.tmp, "g.yaml"), "spikes", include), "--out", cls.out)
        assert p.returncode == 0, show(p)
        cls.records, cls.dirs = {}, {}
        for rid in os.listdir(os.path.join(cls.out, "runs")):
            path = os.path.join(cls.out, "runs", rid, "record.h5")
            rec = read(path)
            c = rec["config"]
            policy = c.get("train.spike_policy", "none")  # left out of the config at its default
            name = policy if policy != "rewind" else "w" + c["dist.world_size"]
            cls.records[name], cls.dirs[name] = rec, os.path.join(cls.out, "runs", rid)
        assert sorted(cls.records) == ["none", "skip", "w1", "w2", "w3"], sorted(cls.records)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def same_bits(self, a, b, what):
        self.assertTrue(np.array_equal(a["loss"].view(np.uint64), b["loss"].view(np.uint64)), what + ": losses")
        self.assertEqual(a["checksum"], b["checksum"], what + ": parameter checksums")
        self.assertEqual(a["skipped"].tolist(), b["skipped"].tolist(), what + ": skipped steps")

    def test_rewind_goes_back_to_the_checkpoint_and_trains_on(self):
        r = self.records["w1"]
        self.assertEqual(len(r["loss"]), 24)
        d = r["summary"]["spike_decision.1"]
        self.assertTrue(d.startswith("step 15: the loss spiked to "), d)
        self.assertIn("; rewound to the checkpoint after step 12, skipping the global batches of steps 13-15 "
                      "(2 updates undone)", d)
        self.assertEqual((r["summary"]["spike_decisions"], r["summary"]["spike_skipped_steps"]), ("1", "13-15"))
        # The parameters after step 15 are those after step 12: steps 13 and 14 undone, 15 not taken.
        self.assertEqual(r["checksum"][15], r["checksum"][12])
        self.assertNotEqual(r["checksum"][14], r["checksum"][12])
        self.assertEqual([s for s, k in zip(r["step"], r["skipped"]) if k], [15])
        # The samples of the three global batches left out: 12 per step, listed by step.
        listed = r["summary"]["spike_skipped_samples"].split("; ")
        self.assertEqual([x.split(":")[0] for x in listed], ["13", "14", "15"])
        self.assertEqual([len(x.split(":")[1].split()) for x in listed], [12, 12, 12])
        # A spike after a bad update, healed: the loss of step 16 is back near the steps before the spike.
        median = float(np.median(r["loss"][4:14]))
        self.assertGreater(r["loss"][14], 2 * median)
        self.assertLess(r["loss"][15], 1.2 * median)
        self.assertEqual(r["summary"]["nonfinite_steps_skipped"], "0")
        self.assertIn("loss_spike", r["summary"]["health"])

    def test_every_layout_decides_alike_and_gives_the_same_bits(self):
        one = self.records["w1"]
        for name in ("w2", "w3"):
            self.same_bits(one, self.records[name], name)
            self.assertEqual(spike_attrs(one), spike_attrs(self.records[name]), name)
        p = sweep("compare", os.path.join(self.dirs["w1"], "record.h5"), os.path.join(self.dirs["w3"], "record.h5"))
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("identical bit-for-bit: 24 steps, 25 checksums", p.stdout)

    def test_without_a_policy_the_damage_stays(self):
        none, rewind = self.records["none"], self.records["w1"]
        self.assertEqual(spike_attrs(none), {})
        self.assertTrue(np.array_equal(none["loss"][:15].view(np.uint64), rewind["loss"][:15].view(np.uint64)))
        self.assertEqual(none["checksum"][14], rewind["checksum"][14])
        self.assertNotEqual(none["checksum"][15], rewind["checksum"][15])
        self.assertGreater(none["loss"][15], 1.5 * rewind["loss"][15])
        self.assertEqual(int(none["skipped"].sum()), 0)
        self.assertIn("loss_spike", none["summary"]["health"])

    def test_skip_leaves_out_updates_up_to_the_limit(self):
        r = self.records["skip"]
        self.assertEqual(r["summary"]["spike_decisions"], "3")
        self.assertEqual(r["summary"]["spike_skipped_steps"], "15 16 17")
        self.assertTrue(r["summary"]["spike_decision.1"].endswith("; its update skipped"), r["summary"])
        self.assertEqual([s for s, k in zip(r["step"], r["skipped"]) if k], [15, 16, 17])
        self.assertEqual(r["checksum"][17], r["checksum"][14])
        self.assertEqual(r["summary"]["nonfinite_steps_skipped"], "0")
        with open(os.path.join(self.dirs["skip"], "logs", "rank0.log"), encoding="utf-8") as f:
            self.assertIn("train.spike_limit (3 decisions) is reached, so it is only flagged", f.read())

    def test_the_record_shows_and_verifies_its_decisions(self):
        path = os.path.join(self.dirs["w2"], "record.h5")
        self.assertEqual(record_digest(path), stored_digest(path))  # the decisions are under the digest
        p = sweep("show", self.dirs["w2"])
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("summary:     spike_decision.1 = step 15: the loss spiked", p.stdout)
        rep = json.loads(sweep("report", self.out, "--format", "json", "-o", "-").stdout)
        runs = {r["run_id"]: r for r in rep["runs"]}
        rid = os.path.basename(self.dirs["w3"])
        self.assertEqual(runs[rid]["spike_decisions"], [self.records["w3"]["summary"]["spike_decision.1"]])
        self.assertEqual(runs[os.path.basename(self.dirs["none"])]["spike_decisions"], [])

    def test_reproduce_replays_the_decision(self):
        p = sweep("reproduce", self.dirs["w2"])
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("reproduced bit-for-bit: 24 steps", p.stdout)

    def crashed(self, name):
        """The 1-rank rewind run, crashed writing its checkpoint after step 16: the newest
        complete one is the checkpoint written after the rewind at step 15."""
        out = os.path.join(self.tmp, name)
        g = write_grid(os.path.join(self.tmp, name + ".yaml"), "spikes", [LAYOUTS["w1"]], fault={"crash_in_checkpoint_step": 16})
        p = sweep("run", g, "--out", out)
        self.assertEqual(p.returncode, 1, show(p))
        (rid,) = os.listdir(os.path.join(out, "runs"))
        ck = os.path.join(out, "runs", rid, "checkpoints")
        complete = sorted(c for c in os.listdir(ck) if os.path.exists(os.path.join(ck, c, "DONE")))
        self.assertEqual(complete[-1], "step_0000000015")
        return out, rid

    def test_a_run_resumed_after_the_rewind_is_the_straight_run(self):
        out, rid = self.crashed("in_place")
        p = sweep("resume", os.path.join(out, "runs", rid))
        self.assertEqual(p.returncode, 0, show(p))
        r = read(os.path.join(out, "runs", rid, "record.h5"))
        self.same_bits(self.records["w1"], r, "resumed in place")
        self.assertEqual(spike_attrs(self.records["w1"]), spike_attrs(r))

    def test_a_run_resumed_on_another_layout_after_the_rewind_is_the_straight_run(self):
        out, rid = self.crashed("other_layout")
        p = sweep("resume", os.path.join(out, "runs", rid), "--world-size", "3")
        self.assertEqual(p.returncode, 0, show(p))
        (nid,) = set(os.listdir(os.path.join(out, "runs"))) - {rid}
        r = read(os.path.join(out, "runs", nid, "record.h5"))
        self.same_bits(self.records["w1"], r, "resumed on 3 ranks")
        self.assertEqual(spike_attrs(self.records["w1"]), spike_attrs(r))

    def test_rewind_without_checkpoints_is_refused(self):
        out = os.path.join(self.tmp, "refused")
        g = write_grid(os.path.join(self.tmp, "refused.yaml"), "spikes", [LAYOUTS["w1"]], train={"checkpoint_every": 0})
        p = sweep("run", g, "--out", out)
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("key 'train.spike_policy': rewind goes back to the last checkpoint; set "
                      "train.checkpoint_every > 0", p.stderr)
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    cli_util.take_bin_dir()
    unittest.main(verbosity=2)
