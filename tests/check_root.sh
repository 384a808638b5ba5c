#!/bin/sh
# ctest root_allowlist: the repository's root holds only what tests/root_allowlist.txt names. Tracked files
# and untracked files git does not ignore both count (a log a loop wrote and `git add -A` would commit);
# ignored outputs (build/, out/) do not. Outside a git checkout (a source tarball) it checks nothing and
# says so (exit 77: skipped).
# Usage: check_root.sh SOURCE_DIR ALLOWLIST
src=$1 list=$2
if ! git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  echo "root_allowlist: $src is not a git checkout; nothing to check"
  exit 77
fi
allowed=$(grep -v '^#' "$list" | grep -v '^$')
status=0
for entry in $(git -C "$src" ls-files --cached --others --exclude-standard | cut -d/ -f1 | sort -u); do
  if ! printf '%s\n' "$allowed" | grep -qxF "$entry"; then
    echo "root_allowlist: '$entry' at the repository's root is not in $list (move it, ignore it, or add it there)"
    status=1
  fi
done
[ "$status" = 0 ] && echo "root_allowlist: the root holds only the allow-list ($(printf '%s\n' "$allowed" | wc -l) entries)"
exit "$status"
