"""Small leaf helpers every layer may use: names, byte units, the walker, gzip, JSON records."""
