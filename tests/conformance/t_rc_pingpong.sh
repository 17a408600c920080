#!/bin/bash
# ibv_rc_pingpong: RC SEND/RECV ping-pong, 1 B to 1 MiB, polling and
# event-driven (-e), with ibv_post_send and with the ibv_wr_* API
# (--new_send), received data checked (-c).
. "$(dirname "$0")/lib.sh"
sr_need_cmd ibv_rc_pingpong
sr_init

sr_pingpong_suite ibv_rc_pingpong "" "-e" "--new_send" "-e --new_send"

sr_finish
