"""The on-disk store every cache shares: files, keys, locks, checksums (store.py), and
listing, verifying, clearing, exporting and importing its entries (admin.py). It knows no
graphs: each kind of entry registers itself with the store."""
