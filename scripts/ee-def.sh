#!/usr/bin/env bash
# One field of execution-environment.yml, for the ee-*.sh scripts (the definition is the
# only place the EE's names are declared): `base_image` (images.base_image.name) or `tag`
# (options.tags[0]).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${GPUHOST_PY:-.venv/bin/python}
"$PY" - "$1" <<'PYEOF'
import sys
import yaml
with open("execution-environment.yml", encoding="utf-8") as handle:
    ee = yaml.safe_load(handle)
field = sys.argv[1]
if field == "base_image":
    print(ee["images"]["base_image"]["name"])
elif field == "tag":
    print(ee["options"]["tags"][0])
else:
    sys.exit("ee-def: unknown field %s" % field)
PYEOF
