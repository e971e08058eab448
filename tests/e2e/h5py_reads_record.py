#!/usr/bin/python3
"""A record is readable without any project code: Debian's h5py finds every dataset
the skeleton documents. Usage: h5py_reads_record.py BIN_DIR RUN_CONFIG"""
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

bin_dir, config = sys.argv[1], sys.argv[2]
with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "run")
    subprocess.run([os.path.join(bin_dir, "sweep-train"), "--config", config, "--out", out, "--quiet"], check=True)
    failures, checks = [], []

    def expect(cond, what):
        checks.append(what)
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            failures.append(what)

    with h5py.File(os.path.join(out, "record.h5"), "r") as f:
        expect(int(f.attrs["schema_version"]) == 1, "schema_version == 1")
        expect(len(f.attrs["run_id"]) == 16, "run_id is 16 hex digits")
        expect(f.attrs["status"] == "completed", "status == completed")
        yaml_text = f["config/yaml"][()].decode()
        expect("train:" in yaml_text and "steps: 12" in yaml_text, "config/yaml holds the resolved config")
        steps = f["metrics/step"][:]
        loss = f["metrics/loss"]
        expect(list(steps) == list(range(1, 13)), "metrics/step is 1..12")
        expect(loss.dtype == np.float64 and loss.shape == (12,), "metrics/loss is float64, one per step")
        expect(bool(np.all(np.isfinite(loss[:]))), "losses are finite")
        params = f["checksums/params"]
        expect(list(f["checksums/step"][:]) == list(range(0, 13)), "checksums/step is 0 (initial) then every step")
        expect(params.dtype == np.uint64 and params.shape == (13,), "checksums/params is uint64, one per step")
        expect(len(set(params[:].tolist())) == 13, "parameters change every step")
        names = [n.decode() for n in f["params/name"][:]]
        expect(f["checksums/tensors"].shape == (13, len(names)), "one hash per parameter tensor per checksum")
        expect("blas" in f["environment"].attrs and "OpenBLAS" in f["environment"].attrs["blas"],
               "environment names the BLAS (OpenBLAS)")
    print(f"h5py: {len(checks) - len(failures)} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)
