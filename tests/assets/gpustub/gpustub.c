// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * gpustub: a stand-in for a GPU driver's DKMS module, for the gpuhost.tuning test labs.
 *
 * It registers one character device named "gpustub" with a DYNAMIC major (like
 * nvidia-uvm: the major shows in /proc/devices and may change across kernels and boots)
 * and takes one load-time parameter, disable_hmm (like nvidia_uvm's uvm_disable_hmm:
 * read-only in /sys/module/gpustub/parameters/, so only modprobe.d or the kernel command
 * line can set it). It does nothing else: no device node, no I/O.
 */
#include <linux/fs.h>
#include <linux/init.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

static int disable_hmm;
module_param(disable_hmm, int, 0444);
MODULE_PARM_DESC(disable_hmm, "Stand-in for uvm_disable_hmm (load-time only; default 0)");

static int gpustub_major;

static const struct file_operations gpustub_fops = {
	.owner = THIS_MODULE,
};

static int __init gpustub_init(void)
{
	int major = register_chrdev(0, "gpustub", &gpustub_fops);

	if (major < 0) {
		pr_err("gpustub: register_chrdev failed: %d\n", major);
		return major;
	}
	gpustub_major = major;
	pr_info("gpustub: major %d, disable_hmm=%d\n", gpustub_major, disable_hmm);
	return 0;
}

static void __exit gpustub_exit(void)
{
	unregister_chrdev(gpustub_major, "gpustub");
}

module_init(gpustub_init);
module_exit(gpustub_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("gpuhost.tuning test stand-in for a GPU driver (chrdev + load-time parameter)");
MODULE_VERSION("1.0");
