"""The OCI registry the driver images are pushed to."""
