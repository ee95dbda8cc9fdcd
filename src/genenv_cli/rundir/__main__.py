"""`python -m genenv_cli.rundir [--write docs/pools.md]`: docs/pools.md's tables, generated from the schemas."""

import sys
from pathlib import Path

from genenv_cli.rundir.schemas import MARKER, markdown_tables

if len(sys.argv) == 3 and sys.argv[1] == "--write":
    doc = Path(sys.argv[2])
    head = doc.read_text().split(MARKER)[0] if doc.exists() else ""
    doc.write_text(head.rstrip() + "\n\n" + MARKER + "\n\n" + markdown_tables())
else:
    print(markdown_tables())
