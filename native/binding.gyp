{
  "targets": [
    {
      "target_name": "syncfs",
      "sources": ["syncfs.c"],
      "cflags": ["-O2", "-Wall"]
    }
  ]
}
