/* The class of a run's last instruction: what the decoders (decode.c,
 * walk.c, x86len.c) tell the tree builder about how a run of
 * instructions ends, in a header of its own so that none of them needs
 * another's. */
#ifndef HTR_ICLS_H
#define HTR_ICLS_H

/* Class of the last instruction of a run. */
enum htr_icls {
	HTR_IC_OTHER = 0,     /* anything that neither enters nor leaves a frame */
	HTR_IC_CALL,          /* near call: the next run starts in the callee */
	HTR_IC_RET,           /* near return */
	HTR_IC_FAR_CALL,      /* far call, syscall, interrupt entry (async
			       * branches are reported with .far_call) */
	HTR_IC_FAR_RET,       /* far return, iret, sysret, sysexit */
	HTR_IC_JUMP,          /* indirect near jump (FF /4): where it lands
			       * may leave frames (longjmp, unwinders) */
};

#endif
