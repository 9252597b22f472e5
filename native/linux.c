/*
 * The two Linux system calls Postern needs and Node does not offer:
 *
 * - syncfs(2): flushes every dirty file and directory of one filesystem in a single call.
 *   Linux documents it as giving "the same guarantees as fsync() called on every file" of that
 *   filesystem, so a group of spool files costs one journal commit instead of one each.
 *   Synchronous on purpose: it is called only from the index writer thread, never the event loop.
 * - sched_setscheduler(2) with SCHED_IDLE for the calling thread: the webhook dispatcher's
 *   thread then runs only on CPU time nothing else wants, and a waking thread of the doors
 *   preempts it at once (a nice value only shrinks its share).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static napi_value throw_errno(napi_env env, int err, const char *code, const char *what) {
  char message[256];
  snprintf(message, sizeof message, "%s: %s", what, strerror(err));
  napi_throw_error(env, code, message);
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
  if (fd < 0) return throw_errno(env, errno, "ESYNCFS", "open");
  int rc = syncfs(fd);
  int err = errno;
  close(fd);
  if (rc != 0) return throw_errno(env, err, "ESYNCFS", "syncfs");
  return NULL;
}

/* For the calling thread only (pid 0 means the caller's thread id on Linux). */
static napi_value IdleScheduling(napi_env env, napi_callback_info info) {
  (void)info;
  struct sched_param param = {.sched_priority = 0};
  if (sched_setscheduler(0, SCHED_IDLE, &param) != 0) return throw_errno(env, errno, "ESCHED", "sched_setscheduler(SCHED_IDLE)");
  return NULL;
}

static int export_function(napi_env env, napi_value exports, const char *name, napi_callback cb) {
  napi_value fn;
  if (napi_create_function(env, name, NAPI_AUTO_LENGTH, cb, NULL, &fn) != napi_ok) return 0;
  return napi_set_named_property(env, exports, name, fn) == napi_ok;
}

NAPI_MODULE_INIT() {
  if (!export_function(env, exports, "syncfs", SyncFilesystem)) return NULL;
  if (!export_function(env, exports, "idleScheduling", IdleScheduling)) return NULL;
  return exports;
}
