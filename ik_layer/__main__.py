"""``python -m ik_layer``: the ``ik-layer`` command line."""

from __future__ import annotations

import sys

from ik_layer.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
