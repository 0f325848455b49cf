#!/bin/sh
# forking.sh MARKER COMMAND [ARG...]: a lock client program that leaves
# processes behind, then runs COMMAND (a correct client) in its place. It
# forks a sleeper (MARKER-fork) and, in a session of its own, a sleeper
# whose parent exits at once (MARKER-setsid: setsid and a double fork),
# both holding the program's stdin, stdout and stderr. The marker in their
# argv is what pgrep -f finds.
marker=$1
shift
python3 -c 'import time; time.sleep(600)' "$marker-fork" &
setsid python3 -c '
import os, time
if os.fork():
    os._exit(0)
time.sleep(600)' "$marker-setsid" &
exec "$@"
