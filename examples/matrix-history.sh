#!/bin/sh
# A small fleet repository with a support matrix that five people changed over a month: the history
# docs/commands/matrix-history.md shows. Fixed names and dates, so the commits (and their hashes) are
# the same on every machine.
#
#   sh examples/matrix-history.sh DIR      # then: cd DIR && gpudrv matrix history
set -eu
dir=${1:?usage: sh examples/matrix-history.sh DIR}
if [ -e "$dir" ]; then
    echo "matrix-history.sh: $dir already exists" >&2
    exit 2
fi
git init -q -b main "$dir"
cd "$dir"
mkdir matrix
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1

as() { # NAME DATE: who commits next, and when
    export GIT_AUTHOR_NAME="$1" GIT_COMMITTER_NAME="$1" GIT_AUTHOR_DATE="$2" GIT_COMMITTER_DATE="$2"
    GIT_AUTHOR_EMAIL="$(echo "$1" | tr 'A-Z ' 'a-z.')@example.com"
    export GIT_AUTHOR_EMAIL GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"
}
rows() { # the matrix, a row per argument
    printf 'driver_branch,kernel,os_tag\n' >matrix/support-matrix.csv
    printf '%s\n' "$@" >>matrix/support-matrix.csv
    git add matrix/support-matrix.csv
}

as "Ana Lima" 2025-03-03T09:00:00+00:00
rows 550,5.15.0-119-generic,ubuntu22.04 535,5.15.0-107-generic,ubuntu22.04 550,6.8.0-45-generic,ubuntu24.04
git commit -q -m "Support matrix: the images of the lab's three nodes"

as "Bo Chen" 2025-03-10T10:00:00+00:00
rows 550,5.15.0-119-generic,ubuntu22.04 535,5.15.0-107-generic,ubuntu22.04 550,6.8.0-45-generic,ubuntu24.04 \
    550,6.8.0-52-generic,ubuntu24.04
git commit -q -m "Image for lab-node-3's kernel (#12)"   # a squash merge

git checkout -q -b upgrade-lab-node-1
as "Dana Park" 2025-03-14T15:00:00+00:00
rows 550,5.15.0-119-generic,ubuntu22.04 535,5.15.0-107-generic,ubuntu22.04 550,6.8.0-45-generic,ubuntu24.04 \
    550,6.8.0-52-generic,ubuntu24.04 550,5.15.0-107-generic,ubuntu22.04
git commit -q -m "Image for lab-node-1's driver upgrade"
git checkout -q main
as "Mo Merger" 2025-03-18T12:00:00+00:00
git merge -q --no-ff -m "Merge pull request #13 from dana/upgrade-lab-node-1" upgrade-lab-node-1

as "Ana Lima" 2025-03-25T09:30:00+00:00
rows 535,5.15.0-107-generic,ubuntu22.04 550,5.15.0-107-generic,ubuntu22.04 550,5.15.0-119-generic,ubuntu22.04 \
    550,6.8.0-45-generic,ubuntu24.04 550,6.8.0-52-generic,ubuntu24.04
git commit -q -m "Sort the matrix (#14)"

as "Cy Ortiz" 2025-04-02T11:00:00+00:00
rows 550,5.15.0-107-generic,ubuntu22.04 550,5.15.0-119-generic,ubuntu22.04 550,6.8.0-45-generic,ubuntu24.04 \
    550,6.8.0-52-generic,ubuntu24.04
git commit -q -m "Retire 535 on 5.15.0-107: lab-node-1 runs 550 now (#15)"
