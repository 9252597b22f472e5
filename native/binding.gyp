{
  "targets": [
    {
      "target_name": "linux",
      "sources": ["linux.c"],
      "cflags": ["-O2", "-Wall"]
    }
  ]
}
