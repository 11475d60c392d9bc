"""``python -m fusedrnn.cli``: the ``fusedrnn`` command (for environments without the console script)."""

from . import main

if __name__ == "__main__":
    main(prog_name="fusedrnn")
