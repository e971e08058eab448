#!/usr/bin/python3
"""run.first_nonfinite_module (python/sweep/run.py): a PyTorch script's own model names the
first module whose output went non-finite, as sweep-train names its decoder's.

a. A NaN weight inside the second block: that block's layer is named, not the embedding
   before it nor the head after it, with the rows whose output went non-finite and its
   input's statistics (exact: a planted input).
b. With sample ids the samples are named; the sentence goes to the record's /summary.
c. The hooks are gone afterwards, and nothing is said of a finite forward.

Usage: test_nonfinite_module.py [BIN_DIR] [unittest options]; BIN_DIR holds sweep.
"""

import os
import shutil
import sys
import tempfile
import unittest

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
import cli_util  # noqa: E402

import torch  # noqa: E402  Debian's python3-torch

import sweep  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(16, 4)
        self.blocks = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)])
        self.head = torch.nn.Linear(4, 16)

    def forward(self, tokens):
        x = self.embed(tokens)
        for b in self.blocks:
            x = torch.relu(b(x))
        return self.head(x).mean()


class FirstNonfiniteModule(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.tmp = tempfile.mkdtemp(prefix="nonfinite_module_test.")
        self.model = Net()
        self.run = sweep.init({}, out=self.tmp)
        self.run.watch(self.model)
        self.tokens = torch.tensor([[1, 2], [3, 4], [5, 6]])

    def tearDown(self):
        self.run.finish()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_the_first_module_with_a_nonfinite_output_is_named_with_its_input(self):
        with torch.no_grad():
            self.model.blocks[1].weight[2, 0] = float("nan")
        # Row 1's input to blocks.1 is what blocks.0 made of its embedding; planted exactly.
        seen = {}
        h = self.model.blocks[1].register_forward_hook(lambda m, i, o: seen.update({"in": i[0].clone()}))
        text = self.run.first_nonfinite_module(lambda: self.model(self.tokens))
        h.remove()
        x = seen["in"].double().reshape(-1)
        self.assertTrue(text.startswith("first non-finite module: blocks.1 (its output non-finite for rows "), text)
        # Every row meets the NaN weight (0 x NaN is NaN too).
        self.assertIn("its output non-finite for rows 0, 1, 2;", text)
        self.assertIn("its input: min %r, max %r, mean %r, absmax %r, 0 of 24 non-finite)"
                      % (float(x.min()), float(x.max()), float(x.mean()), float(x.abs().max())), text)
        self.assertNotIn("embed", text)
        self.assertNotIn("head", text)

    def test_samples_are_named_and_the_sentence_goes_to_the_record(self):
        with torch.no_grad():
            self.model.embed.weight[4] = float("inf")  # token 4: row 1 only
        text = self.run.first_nonfinite_module(lambda: self.model(self.tokens), step=7, sample_ids=[40, 41, 42])
        self.assertTrue(text.startswith("first non-finite module: embed (its output non-finite for sample 41; "
                                        "its input: min 1.0, max 6.0, mean 3.5, absmax 6.0, 0 of 6 non-finite)"),
                        text)
        self.run.log(7, loss=float("nan"))
        self.run.finish(status="diverged", failure="non-finite loss")
        with h5py.File(os.path.join(self.tmp, "record.h5"), "r") as f:
            self.assertEqual(f["summary"].attrs["first_nonfinite_module"].decode()
                             if isinstance(f["summary"].attrs["first_nonfinite_module"], bytes)
                             else f["summary"].attrs["first_nonfinite_module"], "step 7: " + text)

    def test_the_hooks_are_removed_and_a_finite_forward_says_nothing(self):
        before = self.model(self.tokens)
        self.assertEqual(self.run.first_nonfinite_module(lambda: self.model(self.tokens)), "")
        for _, m in self.model.named_modules():
            self.assertEqual(len(m._forward_hooks), 0)
        self.assertTrue(torch.equal(before, self.model(self.tokens)))
        self.assertRaises(ValueError, sweep.init({}).first_nonfinite_module, lambda: None)


if __name__ == "__main__":
    cli_util.take_bin_dir()
    unittest.main(verbosity=2)
