"""`sweep fork` and `sweep resume`: a run of a sweep continued from one of its checkpoints,
inside its sweep directory, as a run whose record names its parent and step.

Fork: run P (lr 3e-3, 16 steps, a checkpoint every 4) forked after step 8 with train.lr 1e-3
is the parent's run to step 8 and the lr-1e-3 schedule after it: rows 1-8 are P's bit for
bit (loss, lr, gradient norm, parameter checksums), rows 9-16 take the lr a straight run of
lr 1e-3 has at those steps, and the whole record is bit for bit the run whose schedule
changes at step 8 (train.lr_switch_step 8, train.lr_before_switch 3e-3, train.lr 1e-3); the record says forked/P/8 (root attributes, `sweep show`,
`sweep status`, the report's JSON) and `sweep reproduce` re-forks it bit for bit. Refused
(exit 2, no run directory made): no change, a model key, an unknown key or value, a step
without a checkpoint, a second driver on the sweep, a fork that is already there.

Resume: a run that crashed writing its checkpoint after step 12 (checkpoints after 4 and 8)
continued on 2 ranks (world 2 x accum 2 instead of 1 x 4) is bit for bit the run trained
straight through without the fault; continued in place it is too. Refused: a run that
finished, a layout that breaks the global batch.
"""

import fcntl
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

MODEL = {"layers": 1, "d_model": 32, "heads": 2, "vocab": 64, "seq_len": 16}


def grid(path, name, train, fault=None):
    base = {"model": MODEL, "data": {"kind": "synthetic", "seed": 0, "branching": 4},
            "train": dict({"steps": 16, "micro_batch": 2, "accum": 4, "lr": 3.0e-3, "schedule": "cosine",
                           "warmup": 2, "checkpoint_every": 4, "keep_checkpoints": 10, "threads": 1,
                           "log_every": 1}, **train)}
    if fault:
        base["fault"] = fault
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump({"name": name, "base": base, "grid": {"train.seed": [0]}}, f)
    return path


def only_run(out):
    (rid,) = os.listdir(os.path.join(out, "runs"))
    return rid


def rows(path):
    with h5py.File(path, "r") as f:
        m = {k: f["metrics"][k][:] for k in ("step", "loss", "lr", "grad_norm")}
        m["checksums"] = f["checksums"]["params"][:]
        m["attrs"] = dict(f.attrs)
    return m


class Fork(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="lineage_fork_test.")
        cls.out = os.path.join(cls.tmp, "s")
        p = sweep("run", grid(os.path.join(cls.tmp, "g.yaml"), "fork", {}), "--out", cls.out)
        assert p.returncode == 0, show(p)
        cls.parent = only_run(cls.out)
        cls.pdir = os.path.join(cls.out, "runs", cls.parent)
        # The straight run of the fork's lr, for the schedule after the fork.
        cls.straight = os.path.join(cls.tmp, "straight")
        p = sweep("run", grid(os.path.join(cls.tmp, "g2.yaml"), "fork", {"lr": 1.0e-3}), "--out", cls.straight)
        assert p.returncode == 0, show(p)
        # A run whose learning rate changes at step 8: 3e-3's schedule to step 8, 1e-3's after.
        cls.switched = os.path.join(cls.tmp, "switched")
        p = sweep("run", grid(os.path.join(cls.tmp, "g3.yaml"), "switch",
                              {"lr": 1.0e-3, "lr_switch_step": 8, "lr_before_switch": 3.0e-3}), "--out", cls.switched)
        assert p.returncode == 0, show(p)
        cls.fork = sweep("fork", cls.pdir, "--from-step", "8", "train.lr=1e-3")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def fork_id(self):
        self.assertEqual(self.fork.returncode, 0, show(self.fork))
        return self.fork.stdout.split(" as run ")[1].split(":")[0]

    def test_a_the_fork_is_the_parent_to_step_s_and_the_new_schedule_after(self):
        fid = self.fork_id()
        self.assertIn("forked run %s at step 8 as run %s: train.lr: 0.003 there, 0.001 here" % (self.parent, fid),
                      self.fork.stdout)
        a = rows(os.path.join(self.pdir, "record.h5"))
        b = rows(os.path.join(self.out, "runs", fid, "record.h5"))
        s = rows(os.path.join(self.straight, "runs", only_run(self.straight), "record.h5"))
        self.assertEqual(b["attrs"]["lineage"], "forked")
        self.assertEqual(b["attrs"]["parent_run_id"], self.parent)
        self.assertEqual(int(b["attrs"]["parent_step"]), 8)
        self.assertEqual(int(b["attrs"]["schema_version"]), 6)
        self.assertNotIn("lineage", a["attrs"])
        self.assertEqual(list(b["step"]), list(range(1, 17)))
        for k in ("loss", "lr", "grad_norm"):
            self.assertEqual(a[k][:8].tobytes(), b[k][:8].tobytes(), k)  # the parent's rows, bit for bit
        self.assertEqual(a["checksums"][:9].tobytes(), b["checksums"][:9].tobytes())  # steps 0-8
        # After step 8: the lr a straight run of lr 1e-3 takes at each step, not the parent's.
        self.assertEqual(b["lr"][8:].tobytes(), s["lr"][8:].tobytes())
        self.assertTrue(np.all(b["lr"][8:-1] < a["lr"][8:-1]), (a["lr"], b["lr"]))  # (both end at 0)
        self.assertEqual(a["loss"][8], b["loss"][8])  # step 9's loss is taken before its update
        self.assertNotEqual(a["loss"][9], b["loss"][9])
        self.assertNotEqual(a["checksums"][9], b["checksums"][9])
        # The fork is, bit for bit, the run whose schedule changes at step 8.
        p = sweep("compare", os.path.join(self.out, "runs", fid, "record.h5"),
                  os.path.join(self.switched, "runs", only_run(self.switched), "record.h5"))
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("identical bit-for-bit: 16 steps, 17 checksums", p.stdout)
        # The Python package verifies the digest, lineage attributes included.
        with h5py.File(os.path.join(self.out, "runs", fid, "record.h5"), "r") as f:
            self.assertEqual(record_digest(f), stored_digest(f))

    def test_a2_the_fork_is_never_a_grid_point_and_its_config_says_what_it_trained(self):
        fid = self.fork_id()
        # The grid's own point of lr 1e-3 (the straight run) is another run: a rerun of that
        # grid here would train it, not call the fork "already completed".
        self.assertNotEqual(fid, only_run(self.straight))
        with open(os.path.join(self.out, "runs", fid, "config.yaml"), encoding="utf-8") as f:
            train = yaml.safe_load(f)["train"]
        self.assertEqual((train["lr"], train["lr_switch_step"], train["lr_before_switch"]), (1.0e-3, 8, 3.0e-3))
        self.assertEqual((train["fork_parent"], train["fork_step"]), (self.parent, 8))
        p = sweep("plan", grid(os.path.join(self.tmp, "g2.yaml"), "fork", {"lr": 1.0e-3}), "--out", self.out)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("(0 done, 1 to run)", p.stdout, show(p))

    def test_b_show_status_and_report_name_the_parent(self):
        fid = self.fork_id()
        p = sweep("show", os.path.join(self.out, "runs", fid))
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("forked from run %s at step 8 (steps 1-8 are its rows)" % self.parent, p.stdout)
        p = sweep("status", self.out)
        line = next(l for l in p.stdout.splitlines() if fid in l)
        self.assertIn("(forked from run %s at step 8: train.lr: 0.003 there, 0.001 here)" % self.parent, line)
        rep = json.loads(sweep("report", self.out, "--format", "json", "-o", "-").stdout)
        runs = {r["run_id"]: r for r in rep["runs"]}
        self.assertEqual(runs[fid]["lineage"], {"kind": "forked", "parent_run_id": self.parent, "parent_step": 8,
                                                "changes": "train.lr: 0.003 -> 0.001"})
        self.assertIsNone(runs[self.parent]["lineage"])
        # The markdown report says the family in the same words as the HTML one.
        md = sweep("report", self.out, "--format", "md", "-o", "-").stdout
        section = md[md.index("## Lineage"):]
        self.assertIn("\n- %s\n  - %s: forked from %s at step 8 (train.lr: 0.003 -&gt; 0.001)\n"
                      % (self.parent, fid, self.parent), section)
        self.assertEqual(rep["summary"]["problems"], rep["summary"]["health_flagged"], rep["summary"])
        # The HTML report draws the family: the parent whole, the fork from step 8, what changed.
        html = sweep("report", self.out, "-o", "-").stdout
        section = html[html.index("<h2>Lineage</h2>"):]
        section = section[:section.index("</figure>")]
        self.assertIn("<li>%s</li>" % self.parent, section)
        self.assertIn("%s: forked from %s at step 8 (train.lr: 0.003 -&gt; 0.001)" % (fid, self.parent), section)
        self.assertIn("%s (forked at step 8)" % fid, section)  # the fork's curve, named
        p = sweep("verify", self.out)
        self.assertEqual(p.returncode, 0, show(p))
        # The parent is part of the digest: a record that names another step is damaged.
        copy = os.path.join(self.tmp, "tampered.h5")
        shutil.copyfile(os.path.join(self.out, "runs", fid, "record.h5"), copy)
        with h5py.File(copy, "r+") as f:
            f.attrs["parent_step"] = np.int64(4)
        p = sweep("compare", copy, os.path.join(self.out, "runs", fid, "record.h5"))
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("integrity check failed", p.stderr)

    def test_c_reproduce_forks_again_from_the_parents_checkpoint(self):
        fid = self.fork_id()
        p = sweep("reproduce", os.path.join(self.out, "runs", fid))
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("reproduced bit-for-bit: 16 steps (8 re-run: steps 9-16; steps 1-8 are the checkpoint's rows)",
                      p.stdout)
        self.assertIn("forked from run %s at step 8 as the original was" % self.parent, p.stdout)

    def test_c2_a_fork_stopped_and_resumed_in_place_still_names_its_parent(self):
        # sweep-train directly: a fork stopped after step 12 (stop_at, as a search rung stops
        # a run), its record moved aside, then resumed in place from its own checkpoint.
        d = os.path.join(self.tmp, "f2")
        os.makedirs(d)
        with open(os.path.join(self.pdir, "config.yaml"), encoding="utf-8") as f:
            cfg = yaml.safe_load(f)
        cfg["train"]["lr"] = 2.0e-3
        with open(os.path.join(d, "config.yaml"), "w", encoding="utf-8") as f:
            yaml.safe_dump(cfg, f)
        with open(os.path.join(d, "stop_at"), "w") as f:
            f.write("12\n")
        trainer = os.path.join(cli_util.BIN_DIR, "sweep-train")
        argv = [trainer, "--config", os.path.join(d, "config.yaml"), "--out", d, "--quiet"]
        p = cli_util.run(argv + ["--fork-from", os.path.join(self.pdir, "checkpoints", "step_0000000008")])
        self.assertEqual(p.returncode, 0, show(p))
        stopped = rows(os.path.join(d, "record.h5"))
        self.assertEqual((stopped["attrs"]["status"], len(stopped["step"])), ("stopped", 12))
        os.rename(os.path.join(d, "record.h5"), os.path.join(d, "record.h5.stopped"))
        os.remove(os.path.join(d, "stop_at"))
        p = cli_util.run(argv + ["--resume"])
        self.assertEqual(p.returncode, 0, show(p))
        b = rows(os.path.join(d, "record.h5"))
        self.assertEqual((b["attrs"]["lineage"], b["attrs"]["parent_run_id"], int(b["attrs"]["parent_step"])),
                         ("forked", self.parent, 8))
        # The same bits as the fork trained straight through by sweep fork.
        p = sweep("fork", self.pdir, "--from-step", "8", "train.lr=2e-3")
        self.assertEqual(p.returncode, 0, show(p))
        fid = p.stdout.split(" as run ")[1].split(":")[0]
        straight = rows(os.path.join(self.out, "runs", fid, "record.h5"))
        for k in ("loss", "lr", "grad_norm", "checksums"):
            self.assertEqual(straight[k].tobytes(), b[k].tobytes(), k)

    def test_d_bad_forks_are_refused_and_make_nothing(self):
        fid = self.fork_id()
        before = sorted(os.listdir(os.path.join(self.out, "runs")))
        digest = stored_digest(h5py.File(os.path.join(self.out, "runs", fid, "record.h5"), "r"))
        cases = [
            (["--from-step", "8", "train.lr=0.003"], "leaves run %s's config as it was" % self.parent),
            (["--from-step", "8", "model.d_model=64"], "the model keys (model.d_model) cannot change"),
            (["--from-step", "8", "train.lrr=1"], "train.lrr"),
            (["--from-step", "8", "train.lr=fast"], "train.lr"),
            (["--from-step", "6", "train.lr=1e-3"],
             "is not a complete checkpoint (complete ones kept: step_0000000004, step_0000000008, "
             "step_0000000012)"),
            (["--from-step", "8", "train.lr=1e-3"], "has finished already"),  # this fork is there
            (["--from-step", "8"], "changes"),  # no KEY=VALUE
            (["--from-step", "8", "train.steps=8", "train.lr=2e-3"],
             "--from-step 8 is not before the fork's last step (train.steps 8): nothing would be left to train"),
        ]
        for args, said in cases:
            p = sweep("fork", self.pdir, *args)
            self.assertEqual(p.returncode, 2, show(p))
            self.assertIn(said, p.stderr, show(p))
            self.assertEqual(sorted(os.listdir(os.path.join(self.out, "runs"))), before, args)
        p = sweep("fork", os.path.join(self.tmp, "g.yaml"), "--from-step", "8", "train.lr=1e-4")
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("not a run directory", p.stderr)
        # A driver on the sweep directory: its lock keeps the fork out.
        with open(os.path.join(self.out, "sweep.lock"), "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            p = sweep("fork", self.pdir, "--from-step", "8", "train.lr=1e-4")
        self.assertEqual(p.returncode, 2, show(p))
        self.assertEqual(sorted(os.listdir(os.path.join(self.out, "runs"))), before)
        self.assertEqual(stored_digest(h5py.File(os.path.join(self.out, "runs", fid, "record.h5"), "r")), digest)


class Resume(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="lineage_resume_test.")
        crash = {"crash_in_checkpoint_step": 12}
        cls.g = grid(os.path.join(cls.tmp, "g.yaml"), "resume", {"keep_checkpoints": 2}, crash)
        # Trained straight through, without the fault: the bits every continuation must give.
        cls.straight = os.path.join(cls.tmp, "straight")
        p = sweep("run", grid(os.path.join(cls.tmp, "gs.yaml"), "resume", {"keep_checkpoints": 2}), "--out",
                  cls.straight)
        assert p.returncode == 0, show(p)
        cls.ref = os.path.join(cls.straight, "runs", only_run(cls.straight), "record.h5")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def crashed(self, name):
        out = os.path.join(self.tmp, name)
        p = sweep("run", self.g, "--out", out)
        self.assertEqual(p.returncode, 1, show(p))  # crashed writing the checkpoint after step 12
        rid = only_run(out)
        return out, rid, os.path.join(out, "runs", rid)

    def identical(self, path):
        p = sweep("compare", self.ref, path)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("identical bit-for-bit: 16 steps, 17 checksums", p.stdout)

    def test_on_another_layout_it_is_the_straight_run(self):
        out, rid, rdir = self.crashed("other_layout")
        p = sweep("resume", rdir, "--world-size", "2")
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("resumed run %s from its step_0000000008 as run " % rid, p.stdout)
        self.assertIn("on world 2 x accum 2 x micro-batch 2 (the same math)", p.stdout)
        (nid,) = set(os.listdir(os.path.join(out, "runs"))) - {rid}
        path = os.path.join(out, "runs", nid, "record.h5")
        self.identical(path)
        a = rows(path)["attrs"]
        self.assertEqual((a["lineage"], a["parent_run_id"], int(a["parent_step"])), ("resumed", rid, 8))
        self.assertEqual(int(a["world_size"]), 2)
        self.assertTrue(os.path.exists(os.path.join(rdir, "record.h5.partial")), "the parent's evidence is kept")
        p = sweep("status", out)
        self.assertIn("(resumed from run %s at step 8 on world 2 x accum 2 x micro-batch 2)" % rid, p.stdout)
        # Bad layouts: refused before anything is made.
        before = sorted(os.listdir(os.path.join(out, "runs")))
        for args, said in ((["--world-size", "3"], "cannot resume on 3 ranks"),
                           (["--micro-batch", "4"], "cannot resume with micro-batch 4"),
                           (["--world-size", "2"], "has finished already")):
            p = sweep("resume", rdir, *args)
            self.assertEqual(p.returncode, 2, show(p))
            self.assertIn(said, p.stderr)
            self.assertEqual(sorted(os.listdir(os.path.join(out, "runs"))), before)

    def test_in_place_it_is_the_straight_run_and_then_finished(self):
        out, rid, rdir = self.crashed("in_place")
        p = sweep("resume", rdir)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("resumed run %s in place from its step_0000000008" % rid, p.stdout)
        self.assertEqual(os.listdir(os.path.join(out, "runs")), [rid])
        self.identical(os.path.join(rdir, "record.h5"))
        self.assertNotIn("lineage", rows(os.path.join(rdir, "record.h5"))["attrs"])
        p = sweep("status", out)
        self.assertIn("1 completed", p.stdout, show(p))
        p = sweep("resume", rdir)
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("has finished (completed): nothing to resume", p.stderr)


if __name__ == "__main__":
    cli_util.take_bin_dir()
    unittest.main(verbosity=2)
