"""python -m shoal FILE...: verify shards and describe each in one line (exit 1 if any fails)."""

import sys

from .shard import main

sys.exit(main(sys.argv[1:]))
