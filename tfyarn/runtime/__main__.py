"""``python -m tfyarn.runtime``: the command of every task container."""

import sys

from tfyarn.runtime.entry import main

if __name__ == "__main__":
    sys.exit(main())
