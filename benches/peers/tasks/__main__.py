"""`python -m peers.tasks OP --system NAME ...`: see the package's doc."""

from peers.tasks import main

main()
