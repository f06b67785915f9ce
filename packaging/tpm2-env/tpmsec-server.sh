# tpmsec-server: login shells reach tpmsec serve with systemd's tools
# (systemd-creds, systemd-cryptenroll) and clevis's tpm2 pin, which open
# /dev/tpmrm0 themselves otherwise, and with the tpmsec command (its socket,
# TPMSEC_TPM=serve). A value set already wins. See
# /usr/share/doc/tpmsec-server/README.Debian.
if [ -e /lib/systemd/system/tpmsec.service ]; then
	: "${SYSTEMD_TPM2_DEVICE:=tabrmd:}"
	: "${TPM2TOOLS_TCTI:=tabrmd:}"
	: "${TPMSEC_TPM:=serve}"
	export SYSTEMD_TPM2_DEVICE TPM2TOOLS_TCTI TPMSEC_TPM
fi
