# shellcheck shell=bash
# Shared by lab/build-image.sh and lab/run.sh: paths, the recipe hash, logging, timing.
LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$LAB_DIR/.." && pwd)
GPUSTUB_SRC="$REPO_DIR/tests/assets/gpustub"
# Built images live outside the checkout (CI clones elsewhere on the same machine and reuses them).
LAB_CACHE=${LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuhost-lab}

# shellcheck source=lab/recipe.env
. "$LAB_DIR/recipe.env"

log() { printf '[lab %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# The cache key: every file that decides what the image contains, by content.
lab_recipe_files() {
  printf '%s\n' "$LAB_DIR/recipe.env" "$LAB_DIR/build-image.sh" "$LAB_DIR/customize.sh"
  find "$LAB_DIR/guest" "$GPUSTUB_SRC" -type f ! -name '*.o' ! -name '*.ko' ! -name '*.mod*' \
    ! -name '.*' ! -name 'Module.symvers' ! -name 'modules.order' | LC_ALL=C sort
}
lab_recipe_hash() {
  local f
  while read -r f; do
    printf '%s\n' "${f#"$REPO_DIR"/}"
    sha256sum <"$f"
  done < <(lab_recipe_files) | sha256sum | cut -c1-16
}
lab_image_dir() { printf '%s/images/%s\n' "$LAB_CACHE" "$(lab_recipe_hash)"; }

# Timings: one "name seconds" line per step into $LAB_TIMINGS (if set) and the log.
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
record_time() { # name start
  local s; s=$(elapsed "$2")
  log "step $1: ${s}s"
  [ -n "${LAB_TIMINGS:-}" ] && printf '%s %s\n' "$1" "$s" >>"$LAB_TIMINGS"
  return 0
}
