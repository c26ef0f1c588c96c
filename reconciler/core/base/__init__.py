"""Small pure tools every room uses: durations, the settings' flag mechanism, label selectors, the
retry policy, GitHub's text rules."""
