#!/usr/bin/env python3
"""Run ansible-inventory --list in process, once per request.

The differential suites (lib/inventory/ansible_test.go) compare Barn's reading
of an inventory with Ansible's for hundreds of generated inventories. One
ansible-inventory process costs about a second, so this driver imports
ansible-core once and runs its real InventoryCLI (the code behind the
ansible-inventory binary) for every request. A few cases also go through the
binary itself, which proves the two give the same answer.

Protocol: one inventory path per line on stdin; one JSON line per request on
stdout:
    {"ok": true,  "list": "<ansible-inventory --list output>"}
    {"ok": false, "error": "<why Ansible could not read it>"}
The first line written is {"ready": true, "ansible": "<version>",
"precedence": [...]}, the VARIABLE_PRECEDENCE the installed Ansible uses.

Every request runs with the inventory's directory as the working directory
(where Pigsty's playbooks live, so the playbook-adjacent group_vars/ are the
same files), and with any unparsable inventory source treated as a failure
instead of Ansible's warning and an empty inventory.
"""
import atexit
import io
import json
import os
import shutil
import sys
import tempfile

# This script's directory (testdata/) holds a directory named ansible/ of
# test inventories, which Python would import instead of ansible-core.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

# Before ansible's constants are imported: fail instead of warning, no
# ansible.cfg from the working directory or /etc, no colour, no noise.
_scratch = tempfile.mkdtemp(prefix="barn-ansible-driver-")
atexit.register(shutil.rmtree, _scratch, ignore_errors=True)
_cfg = os.path.join(_scratch, "ansible.cfg")
open(_cfg, "w").close()
os.environ.update({
    "ANSIBLE_CONFIG": _cfg,
    "ANSIBLE_HOME": _scratch,
    "ANSIBLE_LOCAL_TEMP": _scratch,
    "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True",
    "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "True",
    "ANSIBLE_LOCALHOST_WARNING": "False",
    "ANSIBLE_DEPRECATION_WARNINGS": "False",
    "ANSIBLE_NOCOLOR": "True",
})

from ansible import constants as C  # noqa: E402
from ansible import release  # noqa: E402
from ansible.cli.inventory import InventoryCLI  # noqa: E402
from ansible.utils.context_objects import GlobalCLIArgs  # noqa: E402


def run(path):
    # The CLI stores its arguments in a process-wide singleton; a fresh
    # ansible-inventory process starts without one.
    GlobalCLIArgs._Singleton__instance = None
    out = os.path.join(_scratch, "list.json")
    if os.path.exists(out):
        os.remove(out)
    directory = path if os.path.isdir(path) else os.path.dirname(path) or "."
    here = os.getcwd()
    os.chdir(directory)
    err = io.StringIO()
    real_stderr = sys.stderr
    sys.stderr = err
    try:
        cli = InventoryCLI(["ansible-inventory", "-i", os.path.abspath(os.path.join(here, path)), "--list", "--output", out])
        try:
            cli.run()
        except SystemExit as e:
            if e.code not in (0, None):
                return {"ok": False, "error": "exit %s: %s" % (e.code, err.getvalue().strip())}
        with open(out) as f:
            return {"ok": True, "list": f.read()}
    except Exception as e:  # what ansible-inventory reports and exits on
        return {"ok": False, "error": "%s: %s %s" % (type(e).__name__, e, err.getvalue().strip())}
    finally:
        sys.stderr = real_stderr
        os.chdir(here)


def main():
    print(json.dumps({"ready": True, "ansible": release.__version__, "precedence": list(C.VARIABLE_PRECEDENCE)}), flush=True)
    for line in sys.stdin:
        path = line.rstrip("\n")
        if path:
            print(json.dumps(run(path)), flush=True)


if __name__ == "__main__":
    main()
