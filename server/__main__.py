"""``python -m server [flags]``: run the HTTP service (``--help`` lists the flags)."""

import sys

from server.run import serve

serve(sys.argv[1:])
