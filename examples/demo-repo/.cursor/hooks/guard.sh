#!/bin/sh
# Blocks shell commands that destroy data or rewrite shared history; allows the rest.
input=$(cat)
cmd=$(printf '%s' "$input" | jq -r '.command // ""')
case "$cmd" in
  *"rm -rf /"*|*"rm -rf ~"*|*"rm -rf ."*)
    reason="recursive delete of a root, home or workspace directory" ;;
  *"git push --force"*|*"git push -f"*)
    reason="force push rewrites shared history" ;;
  *)
    echo '{"permission": "allow"}'
    exit 0 ;;
esac
jq -n --arg r "$reason" --arg c "$cmd" '{
  permission: "deny",
  user_message: ("Blocked by the project guard: " + $r),
  agent_message: ("The command `" + $c + "` is not allowed here (" + $r + "). Use a safer alternative.")
}'
