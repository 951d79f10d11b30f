from compress.cli.app import main

main()
