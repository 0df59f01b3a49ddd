"""`thork plugins` lists this package under fkl's front-end, with the ops it ships."""

import json
import subprocess
import sys


def test_thork_plugins_lists_the_op_plugin_and_its_ops():
    r = subprocess.run([sys.executable, "-m", "thork_core", "plugins", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    mine = [p for p in json.loads(r.stdout) if p["distribution"] == "fkl-ops-extra"]
    assert len(mine) == 1, mine
    p = mine[0]
    assert p["via"] == "compose" and not p["error"] and p["version"] == "0.1.0"
    ops = p["registered"]["fkl_ops"]
    assert {o.rsplit(".", 1)[1] for o in ops} == {"Gamma", "LUT", "Clamp"}, ops
