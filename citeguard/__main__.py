"""``python -m citeguard``: the same command line as the ``citeguard`` script."""

from citeguard.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
