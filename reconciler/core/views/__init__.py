"""What commands show or write from the rest: the fleet page's data, explain, diff, the labels each
command reads, gpudrv init's scaffold."""
