#!/bin/bash
# ibv_uc_pingpong: UC SEND/RECV ping-pong, 1 B to 1 MiB, polling and
# event-driven.  lo loses nothing, so UC must deliver every message.
. "$(dirname "$0")/lib.sh"
sr_need_cmd ibv_uc_pingpong
sr_init

sr_pingpong_suite ibv_uc_pingpong "" "-e"

sr_finish
