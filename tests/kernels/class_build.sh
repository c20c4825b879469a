# Sourced by the compile scripts of tests/kernels/nvcc and tests/kernels/hip: reads a device's class
# build from `met circuit kernels --hardware DEVICE --build` (never a list kept in a script).
# read_class_build MET DEVICE [KERNELS_DIR] sets arch, defines (as -D flags) and sources (tree
# paths), and fails on a line it does not know or a chain without sources.
read_class_build() {
  local met=$1 device=$2 line build
  local met_args=()
  [[ $# -ge 3 ]] && met_args=(--kernels "$3")
  build=$("$met" "${met_args[@]}" circuit kernels --hardware "$device" --build) || return 2
  arch=""
  defines=()
  sources=()
  while IFS= read -r line; do
    case "$line" in
      "arch "*) arch=${line#arch } ;;
      "define "*) defines+=("-D${line#define }") ;;
      "source "*) sources+=("${line#source }") ;;
      *)
        echo "error: unexpected line in \`met circuit kernels --hardware $device --build\`: '$line'" >&2
        return 2 ;;
    esac
  done <<<"$build"
  if [[ ${#sources[@]} -eq 0 ]]; then
    echo "error: device '$device': the class chain has no sources" >&2
    return 2
  fi
}
