/*
 * syncfs(2) for Node: flushes every dirty file and directory of one filesystem in a single
 * call. Linux documents it as giving "the same guarantees as fsync() called on every file" of
 * that filesystem, so a group of spool files costs one journal commit instead of one each.
 * Synchronous on purpose: it is called only from the index writer thread, never the event loop.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static napi_value throw_errno(napi_env env, int err, const char *what) {
  char message[256];
  snprintf(message, sizeof message, "%s: %s", what, strerror(err));
  napi_throw_error(env, "ESYNCFS", message);
  return NULL;
}

static napi_value SyncFilesystem(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  char path[4096];
  size_t length = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
      napi_get_value_string_utf8(env, argv[0], path, sizeof path, &length) != napi_ok || length >= sizeof path - 1) {
    napi_throw_type_error(env, NULL, "syncfs(path): path must be a string shorter than 4096 bytes");
    return NULL;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return throw_errno(env, errno, "open");
  int rc = syncfs(fd);
  int err = errno;
  close(fd);
  if (rc != 0) return throw_errno(env, err, "syncfs");
  return NULL;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  if (napi_create_function(env, "syncfs", NAPI_AUTO_LENGTH, SyncFilesystem, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "syncfs", fn) != napi_ok) return NULL;
  return exports;
}
