# shellcheck shell=bash
# Shared by lab/build-image.sh and lab/run.sh: paths, the recipe hash, logging, timing.
LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$LAB_DIR/.." && pwd)
GPUSTUB_SRC="$REPO_DIR/tests/assets/gpustub"
# Built images live outside the checkout (CI clones elsewhere on the same machine and reuses them).
LAB_CACHE=${LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuhost-lab}

# The image recipe: lab/recipe.env (Debian 12, PVE 8's userland) or, with
# LAB_RECIPE=recipe-trixie, lab/recipe-trixie.env (Debian 13, PVE 9's). Each recipe has its
# own cache key, so both images stay cached side by side.
LAB_RECIPE=${LAB_RECIPE:-recipe}
LAB_RECIPE_FILE="$LAB_DIR/$LAB_RECIPE.env"
[ -f "$LAB_RECIPE_FILE" ] || { printf 'lab: no recipe %s\n' "$LAB_RECIPE_FILE" >&2; exit 1; }
# shellcheck source=lab/recipe.env
. "$LAB_RECIPE_FILE"

log() { printf '[lab %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# The cache key: every file that decides what the image contains, by content.
lab_recipe_files() {
  printf '%s\n' "$LAB_RECIPE_FILE" "$LAB_DIR/build-image.sh" "$LAB_DIR/customize.sh"
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
