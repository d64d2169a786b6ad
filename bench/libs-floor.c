/* SPDX-License-Identifier: MIT */
/*
 * The floor under npuprofd's resident memory: a process that loads the libraries the daemon
 * loads (libuv, jansson, libsystemd and what they pull in), calls into each once, as the
 * daemon's start does, and then waits. What bench-daemon measures above this is npuprofd's own.
 */
#include <jansson.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>
#include <uv.h>

int main(void)
{
        uv_loop_t *loop = uv_default_loop();
        json_t *o = json_pack("{s:i}", "floor", 1);

        sd_notify(0, "STATUS=floor");
        json_decref(o);
        uv_run(loop, UV_RUN_NOWAIT);
        pause();
        return 0;
}
