from pithledger.cli import main

main()
