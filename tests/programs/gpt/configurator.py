# The globals-style configurator of public GPT training scripts: exec'd by train.py, it
# runs each argument that names a file (a config file of assignments), and sets
# --key=value for a key the script defines, typed like its default.
# python train.py config/tiny.py --batch_size=8
import sys
from ast import literal_eval

for arg in sys.argv[1:]:
    if "=" not in arg:
        assert not arg.startswith("--")
        print(f"Overriding config with {arg}:")
        with open(arg) as f:
            exec(f.read())
    else:
        assert arg.startswith("--")
        key, val = arg.split("=", 1)
        key = key[2:]
        if key not in globals():
            raise ValueError(f"Unknown config key: {key}")
        try:
            attempt = literal_eval(val)
        except (SyntaxError, ValueError):
            attempt = val
        assert type(attempt) == type(globals()[key]), f"{key}: {attempt!r} is not a {type(globals()[key]).__name__}"
        print(f"Overriding: {key} = {attempt}")
        globals()[key] = attempt
