"""``python -m ik_layer.server [flags]``: run the HTTP service (``--help`` lists the flags)."""

import sys

from ik_layer.server.run import serve

__all__ = ["serve"]

if __name__ == "__main__":
    sys.exit(serve(sys.argv[1:]))
