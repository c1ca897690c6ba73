"""The command line (``ik-layer`` / ``python -m ik_layer``) and its file formats."""
