// SPDX-License-Identifier: GPL-2.0
/* gpuhost.tuning stand-in for nvidia-uvm.ko: does nothing; built by real dkms, never loaded. */
#include <linux/init.h>
#include <linux/module.h>

static int __init standin_init(void)
{
	return 0;
}

static void __exit standin_exit(void)
{
}

module_init(standin_init);
module_exit(standin_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("gpuhost.tuning stand-in NVIDIA UVM module");
MODULE_VERSION("@VERSION@");
