"""The GPU Operator's Helm chart: its data file, values files, HelmReleases and Argo CD Applications."""
