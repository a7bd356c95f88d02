from giant_assets.cluster.demo import main

main()
