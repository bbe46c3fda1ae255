"""``python -m bonsai``: the command line (``bonsai.cli``)."""
from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
