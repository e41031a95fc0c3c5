# Copyright 2018 Red Hat, Inc.
# All Rights Reserved.
#
#    Licensed under the Apache License, Version 2.0 (the "License"); you may
#    not use this file except in compliance with the License. You may obtain
#    a copy of the License at
#
#         http://www.apache.org/licenses/LICENSE-2.0
#
#    Unless required by applicable law or agreed to in writing, software
#    distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
#    WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
#    License for the specific language governing permissions and limitations
#    under the License.

import base64
from concurrent import futures
import math
import os
import sqlite3
import time
from urllib import parse as urlparse

from sushy_tools.emulator import memoize
from sushy_tools.emulator.resources.systems.base import AbstractSystemsDriver
from sushy_tools import error

try:
    import openstack

except ImportError:
    openstack = None


is_loaded = bool(openstack)

FUTURES = {}


class OpenStackDriver(AbstractSystemsDriver):
    """OpenStack driver"""

    NOVA_POWER_STATE_ON = 1

    BOOT_DEVICE_MAP = {
        'Pxe': 'network',
        'Hdd': 'hd',
        'Cd': 'cdrom',
    }

    # Disk format detection constants
    DISK_FORMAT_RAW = 'raw'
    DISK_FORMAT_QCOW2 = 'qcow2'
    DISK_FORMAT_ISO = 'iso'
    QCOW_MAGIC_BYTES = b'QFI\xfb'  # QCOW/QCOW2 magic bytes at offset 0
    ISO_MAGIC_BYTES = b'CD001'  # ISO 9660 signature
    ISO_MAGIC_OFFSET = 32769  # First 32768 bytes reserved in ISO format
    ISO_EXTENSION = '.iso'
    QCOW_EXTENSIONS = ('.qcow2', '.qcow')

    BOOT_DEVICE_MAP_REV = {v: k for k, v in BOOT_DEVICE_MAP.items()}

    BOOT_MODE_MAP = {
        'Legacy': 'bios',
        'UEFI': 'uefi',
    }

    BOOT_MODE_MAP_REV = {v: k for k, v in BOOT_MODE_MAP.items()}

    # Rescue boot mode metadata values
    RESCUE_MODE_PXE = 'pxe'
    RESCUE_MODE_CDROM = 'cdrom'
    RESCUE_MODE_DISK = 'disk'

    PERMANENT_CACHE = {}

    @classmethod
    def initialize(cls, config, logger, os_cloud, *args, **kwargs):
        cls._config = config
        cls._logger = logger
        cls._os_cloud = os_cloud

        cls._cc = openstack.connect(cloud=os_cloud)
        cls._executor = futures.ThreadPoolExecutor(max_workers=4)

        # Cache rescue PXE boot enabled flag
        cls._rescue_pxe_enabled = config.get(
            'SUSHY_EMULATOR_OS_RESCUE_PXE_BOOT', False)

        # Cache rescue vmedia enabled flag
        cls._rescue_vmedia_enabled = config.get(
            'SUSHY_EMULATOR_OS_VMEDIA_USE_RESCUE', False)

        # Generic flag for any rescue-based feature
        cls._rescue_enabled = (cls._rescue_pxe_enabled
                               or cls._rescue_vmedia_enabled)

        # Validate rescue-based PXE boot configuration if enabled
        if cls._rescue_pxe_enabled:
            cls._validate_rescue_pxe_images()

        # Initialize persistent storage for rescue features
        if cls._rescue_enabled:
            cls._init_rescue_persistent_storage(config, logger)

        # Initialize persistent storage for volume vmedia
        # (unless rescue vmedia is enabled, which uses its own storage)
        if not cls._rescue_vmedia_enabled:
            cls._init_volume_vmedia_persistent_storage(config, logger)

        return cls

    @classmethod
    def _make_persistent_safe(cls, persistent_dict, state_dir, name, logger):
        """Safely make a PersistentDict permanent with race condition handling

        :param persistent_dict: PersistentDict instance to make permanent
        :param state_dir: Directory for persistent storage
        :param name: Name for the persistent storage file
        :param logger: Logger instance
        """
        try:
            persistent_dict.make_permanent(state_dir, name)
        except sqlite3.OperationalError as e:
            # Handle concurrent initialization in multi-worker environments
            # (e.g., Flask dev server with auto-reload)
            logger.warning(
                'PersistentDict initialization warning for %s: %s. '
                'This is normal in multi-worker environments.', name, e)

    @classmethod
    def _init_rescue_persistent_storage(cls, config, logger):
        """Initialize persistent storage for rescue features

        Used by both rescue PXE and rescue vmedia features.
        This avoids ConflictException when instances are in RESCUED state
        (Nova blocks metadata updates in that state).

        :param config: Configuration object
        :param logger: Logger instance
        """
        state_dir = config.get('SUSHY_EMULATOR_STATE_DIR')

        if cls._rescue_enabled:
            cls._rescue_boot_modes = memoize.PersistentDict()
            cls._make_persistent_safe(
                cls._rescue_boot_modes, state_dir, 'rescue_boot_modes', logger)

        if cls._rescue_vmedia_enabled:
            # Store per-instance image IDs for rescue operations
            # Unlike PXE rescue (which uses shared iPXE images), each
            # instance gets its own uploaded ISO image
            cls._rescue_vmedia_images = memoize.PersistentDict()
            cls._make_persistent_safe(
                cls._rescue_vmedia_images, state_dir,
                'rescue_vmedia_images', logger)

            # Store per-instance vmedia attributes (image URL and local
            # file path). Necessary because Nova blocks metadata updates
            # in RESCUED state
            cls._rescue_vmedia_attrs = memoize.PersistentDict()
            cls._make_persistent_safe(
                cls._rescue_vmedia_attrs, state_dir,
                'rescue_vmedia_attrs', logger)

            # Cache rescue device configuration for vmedia
            cls._rescue_vmedia_device = config.get(
                'SUSHY_EMULATOR_OS_VMEDIA_RESCUE_DEVICE', 'cdrom')
            cls._rescue_vmedia_bus = config.get(
                'SUSHY_EMULATOR_OS_VMEDIA_RESCUE_BUS', 'sata')

            logger.info(
                'Rescue-based vmedia enabled with device=%s, bus=%s',
                cls._rescue_vmedia_device, cls._rescue_vmedia_bus
            )

    @classmethod
    def _init_volume_vmedia_persistent_storage(cls, config, logger):
        """Initialize persistent storage for volume-based vmedia

        Stores image IDs and attributes for volume-based vmedia operations.
        Uses PersistentDict instead of Nova metadata for consistency and
        to avoid potential issues with metadata updates.

        :param config: Configuration object
        :param logger: Logger instance
        """
        state_dir = config.get('SUSHY_EMULATOR_STATE_DIR')

        # Store per-instance image IDs for volume vmedia
        cls._volume_vmedia_images = memoize.PersistentDict()
        cls._make_persistent_safe(
            cls._volume_vmedia_images, state_dir,
            'volume_vmedia_images', logger)

        # Store per-instance vmedia attributes (image URL and local
        # file path)
        cls._volume_vmedia_attrs = memoize.PersistentDict()
        cls._make_persistent_safe(
            cls._volume_vmedia_attrs, state_dir,
            'volume_vmedia_attrs', logger)

        # Store delay-eject flags
        cls._volume_vmedia_delay_eject = memoize.PersistentDict()
        cls._make_persistent_safe(
            cls._volume_vmedia_delay_eject, state_dir,
            'volume_vmedia_delay_eject', logger)

    @classmethod
    def _validate_rescue_pxe_images(cls):
        """Validate that iPXE rescue images exist when rescue mode is enabled

        :raises: `error.FishyError` if required images are not found
        """
        bios_image_name = cls._config.get(
            'SUSHY_EMULATOR_OS_RESCUE_PXE_IMAGE_BIOS',
            'ipxe-rescue-bios'
        )
        uefi_image_name = cls._config.get(
            'SUSHY_EMULATOR_OS_RESCUE_PXE_IMAGE_UEFI',
            'ipxe-rescue-uefi'
        )

        missing_images = []

        bios_image = cls._cc.image.find_image(bios_image_name)
        if bios_image is None:
            missing_images.append(bios_image_name)

        uefi_image = cls._cc.image.find_image(uefi_image_name)
        if uefi_image is None:
            missing_images.append(uefi_image_name)

        if missing_images:
            msg = (
                'SUSHY_EMULATOR_OS_RESCUE_PXE_BOOT is enabled but required '
                'iPXE rescue images are missing: %s'
                % ', '.join(missing_images)
            )
            cls._logger.error(msg)
            raise error.FishyError(msg)

        cls._logger.info(
            'Rescue-based PXE boot enabled with images: BIOS=%s, UEFI=%s',
            bios_image_name, uefi_image_name
        )

    @memoize.memoize()
    def _get_instance(self, identity):
        instance = self._cc.get_server(identity)
        if instance:
            if identity != instance.id:
                raise error.AliasAccessError(instance.id)

            return instance

        msg = ('Error finding instance by UUID "%(identity)s" at OS '
               'cloud %(os_cloud)s"' % {'identity': identity,
                                        'os_cloud': self._os_cloud})

        self._logger.debug(msg)

        raise error.NotFound(msg)

    @memoize.memoize(permanent_cache=PERMANENT_CACHE)
    def _get_flavor(self, identity):
        instance = self._get_instance(identity)
        return self._cc.get_flavor(instance.flavor.original_name)

    @memoize.memoize(permanent_cache=PERMANENT_CACHE)
    def _get_image_info(self, identity):
        if not identity:
            return
        return self._cc.image.find_image(identity)

    @memoize.memoize(permanent_cache=PERMANENT_CACHE)
    def _get_volume_info(self, identity):
        if not identity:
            return
        return self._cc.volume.get_volume(identity)

    def _get_instance_image_id(self, instance):
        # instance.image.id is always None for boot from volume instance
        image_id = instance.image.get('id')

        if image_id is None and len(instance.attached_volumes) > 0:
            vol = self._get_volume_info(instance.attached_volumes[0].id)
            image_id = vol.volume_image_metadata.get('image_id')

        return image_id

    def _get_server_metadata(self, identity):
        return self._cc.compute.get_server_metadata(identity).to_dict()

    def _set_server_metadata(self, identity, metadata):
        self._cc.compute.set_server_metadata(identity, metadata)

    @property
    def _futures(self):
        return FUTURES

    @property
    def connection(self):
        """Return openstack connection

        :returns: Connection object
        """
        return self._cc

    @property
    def driver(self):
        """Return human-friendly driver description

        :returns: driver description as `str`
        """
        return '<OpenStack compute>'

    @property
    def systems(self):
        """Return available computer systems

        :returns: list of UUIDs representing the systems
        """
        return [server.id for server in self._cc.list_servers(bare=True)]

    def uuid(self, identity):
        """Get computer system UUID by name

        :param identity: OpenStack instance name or ID

        :returns: computer system UUID
        """
        instance = self._get_instance(identity)
        return instance.id

    def name(self, identity):
        """Get computer system name by name

        :param identity: OpenStack instance name or ID

        :returns: computer system name
        """
        instance = self._get_instance(identity)
        return instance.name

    def get_power_state(self, identity):
        """Get computer system power state

        :param identity: OpenStack instance name or ID

        :returns: *On* or *Off*`str` or `None`
            if power state can't be determined
        """
        try:
            # Get instance (uses cache) then fetch fresh state
            instance = self._get_instance(identity)
            instance.fetch(self._cc.compute)

        except error.FishyError:
            return

        if instance.power_state == self.NOVA_POWER_STATE_ON:
            return 'On'

        return 'Off'

    def _check_and_wait_for_task_state(self, instance, max_wait=20,
                                       initial_wait=2, stability_wait=4):
        """Wait for instance task_state to clear and become stable

        Polls with exponential backoff until task_state is None, then performs
        a stability check to ensure it remains None.

        :param instance: Current instance object
        :param max_wait: Maximum time to wait in seconds (default 20)
        :param initial_wait: Initial wait interval (exponential backoff)
        :param stability_wait: Time to wait after task_state=None to ensure
                               it stays None (catches rapid state transitions)
        :returns: Tuple of (is_ready, instance) where is_ready is True if
                  task_state is None and stable, False if still busy
        """
        # Fetch fresh state before checking
        instance.fetch(self._cc.compute)

        waited = 0
        wait_interval = initial_wait
        max_interval = 5  # Cap exponential backoff at 5 seconds

        while waited < max_wait:
            sleep_time = min(wait_interval, max_wait - waited)
            time.sleep(sleep_time)
            waited += sleep_time

            # Still busy, fetch new state and apply exponential backoff
            if instance.task_state is not None:
                wait_interval = min(wait_interval * 2, max_interval)
                instance.fetch(self._cc.compute)
                continue

            # This catches Nova doing rapid state transitions like:
            # rebuilding -> None -> powering-off -> None
            self._logger.debug(
                'Instance %(identity)s task_state cleared after '
                '%(waited)s seconds, verifying stability' %
                {'identity': instance.id, 'waited': waited})

            # Cap stability wait to not exceed max_wait
            stability_sleep = min(stability_wait, max_wait - waited)
            time.sleep(stability_sleep)
            waited += stability_sleep

            instance.fetch(self._cc.compute)

            # Task state changed again, reset backoff and continue waiting
            if instance.task_state is not None:
                self._logger.debug(
                    'Instance %(identity)s task_state changed to '
                    '%(task_state)s during stability check, '
                    'continuing to wait' %
                    {'identity': instance.id,
                     'task_state': instance.task_state})
                wait_interval = initial_wait
                continue

            # Task state is stable at None, return success
            return True, instance

        # Task still running after max_wait
        return False, instance

    def _wait_for_power_state_stable(self, instance, max_wait=10,
                                     expected_power_state=None):
        """Wait for instance power state to stabilize after power operations

        After power operations like stop_server(), Nova's power_state may
        take time to reflect the actual state. This method waits for both
        task_state to clear and power_state to stabilize, ensuring clients
        get accurate state information.

        :param instance: Current instance object
        :param max_wait: Maximum time to wait in seconds (default 10)
        :param expected_power_state: Optional expected power state value
            (e.g., NOVA_POWER_STATE_ON). If provided, raises FishyError
            if final stable state doesn't match expected state.
        :returns: Refreshed instance object
        :raises: `error.FishyError` if expected_power_state is provided and
            final state doesn't match
        """
        waited = 0
        check_interval = 2

        # First wait for task_state to clear
        is_ready, instance = self._check_and_wait_for_task_state(
            instance, max_wait=max_wait)
        if not is_ready:
            self._logger.debug(
                'Instance %(identity)s still busy after %(wait)s seconds' %
                {'identity': instance.id, 'wait': max_wait})
            return instance

        # Then add stability delay to let power_state fully settle
        # This prevents race conditions where we report state too early
        while waited < max_wait:
            time.sleep(min(check_interval, max_wait - waited))
            waited += check_interval

            previous_power_state = instance.power_state
            instance.fetch(self._cc.compute)

            # Power state has stabilized if it hasn't changed
            if instance.power_state == previous_power_state:
                # If expected state is specified, only consider stable if it
                # matches the expected state
                if expected_power_state is not None:
                    if instance.power_state == expected_power_state:
                        self._logger.debug(
                            'Instance %(identity)s power state stable at '
                            'expected state %(power_state)s after '
                            '%(waited)s seconds' %
                            {'identity': instance.id,
                             'power_state': instance.power_state,
                             'waited': waited})
                        return instance
                    # Stable but at wrong state - continue waiting
                    self._logger.debug(
                        'Instance %(identity)s power state stable at '
                        '%(power_state)s but expected %(expected)s, '
                        'continuing to wait' %
                        {'identity': instance.id,
                         'power_state': instance.power_state,
                         'expected': expected_power_state})
                    continue
                else:
                    # No expected state specified, any stable state is OK
                    self._logger.debug(
                        'Instance %(identity)s power state stable at '
                        '%(power_state)s after %(waited)s seconds' %
                        {'identity': instance.id,
                         'power_state': instance.power_state,
                         'waited': waited})
                    break

        # If we exited the loop and expected_power_state was specified,
        # verify we reached the expected state
        if expected_power_state is not None:
            instance.fetch(self._cc.compute)
            if instance.power_state != expected_power_state:
                # Build detailed error message with fault info if available
                fault_info = ''
                if hasattr(instance, 'fault') and instance.fault:
                    fault_code = instance.fault.get('code', 'N/A')
                    fault_msg = instance.fault.get('message', 'N/A')
                    fault_info = (', fault_code=%s, fault_message=%s' %
                                  (fault_code, fault_msg))

                msg = (
                    'Power state verification failed for instance '
                    '%(identity)s after %(waited)s seconds. Expected '
                    'power_state=%(expected)s but got '
                    'power_state=%(actual)s. Instance details: '
                    'status=%(status)s, vm_state=%(vm_state)s, '
                    'task_state=%(task_state)s%(fault)s' %
                    {'identity': instance.id,
                     'waited': waited,
                     'expected': expected_power_state,
                     'actual': instance.power_state,
                     'status': instance.status,
                     'vm_state': instance.vm_state,
                     'task_state': instance.task_state,
                     'fault': fault_info})
                self._logger.error(msg)

                # Dump full instance data as JSON for diagnostics
                try:
                    import json
                    instance_dict = instance.to_dict()
                    instance_json = json.dumps(
                        instance_dict, indent=2, default=str)
                    self._logger.debug(
                        'Full instance data for %(identity)s: %(data)s' %
                        {'identity': instance.id, 'data': instance_json})
                except Exception as e:
                    self._logger.debug(
                        'Failed to serialize instance data: %s', e)

                raise error.FishyError(msg, 500)

        return instance

    def _raise_unknown_power_state(self, state):
        """Raise error for unknown power state

        :param state: The unknown power state requested
        :raises: `error.BadRequest` with descriptive message
        """
        raise error.BadRequest(
            'Unknown ResetType "%(state)s"' % {'state': state})

    def _unrescue_before_power_operation(self, instance):
        """Unrescue instance before power operation

        Nova doesn't allow power operations on rescued instances, so we need
        to unrescue first. This method will raise FishyError(503) if the
        unrescue operation hasn't completed yet.

        :param instance: OpenStack instance object
        :raises: `error.FishyError` with 503 if unrescue in progress
        """
        self._logger.debug(
            'Instance %(identity)s in rescue mode, unrescuing before '
            'power operation' % {'identity': instance.id})
        self._cc.compute.unrescue_server(instance.id)

        # Wait for unrescue to complete
        is_ready, _ = self._check_and_wait_for_task_state(instance)
        if not is_ready:
            msg = ('SYS518: Cloud instance unrescuing, retry required')
            raise error.FishyError(msg, 503)

        # Verify vm_state changed from RESCUED to ACTIVE
        instance.fetch(self._cc.compute)
        if self._is_instance_in_rescue(instance):
            self._logger.debug(
                'Unrescue incomplete: instance=%(id)s still in vm_state '
                'RESCUED, returning 503' % {'id': instance.id})
            msg = ('SYS518: Cloud instance still in rescue mode, '
                   'retry required')
            raise error.FishyError(msg, 503)

        self._logger.debug(
            'Unrescue complete: instance=%(id)s successfully exited '
            'rescue mode' % {'id': instance.id})

    def set_power_state(self, identity, state):
        """Set computer system power state

        :param identity: OpenStack instance name or ID
        :param state: string literal requesting power state transition.
            Valid values  are: *On*, *ForceOn*, *ForceOff*, *GracefulShutdown*,
            *GracefulRestart*, *ForceRestart*, *Nmi*.

        :raises: `error.FishyError` if power state can't be set

        .. note::
           *Nmi* is not supported as openstacksdk does not provide this
           capability.
        """
        # Get instance (uses cache) then fetch fresh state
        instance = self._get_instance(identity)
        instance.fetch(self._cc.compute)

        # Log current instance state for diagnostics
        self._logger.debug(
            'set_power_state called: identity=%(identity)s, '
            'requested_state=%(state)s, current_power_state=%(power_state)s, '
            'current_status=%(status)s, current_task_state=%(task_state)s' %
            {'identity': identity, 'state': state,
             'power_state': instance.power_state,
             'status': instance.status,
             'task_state': instance.task_state})

        # Check if instance is in ERROR state
        if instance.status == 'ERROR':
            msg = ('Cloud instance %(identity)s is in ERROR state. '
                   'Power operations cannot be performed. '
                   'Please check Nova logs and fix the instance.' %
                   {'identity': identity})
            self._logger.error(msg)
            raise error.FishyError(msg, 500)

        # Check if instance is ready before attempting any operations
        # Prevents power actions and rebuilds during busy states
        # (e.g. powering-off, powering-on, rebuilding, spawning)
        is_ready, instance = self._check_and_wait_for_task_state(instance)
        if not is_ready:
            msg = ('SYS518: Cloud instance is busy, task_state: %s'
                   % instance.task_state)
            raise error.FishyError(msg, 503)

        # Dispatch to appropriate power state handler
        if self._rescue_enabled:
            self._set_power_state_rescue(instance, state)
        else:
            self._set_power_state_default(instance, state)

    def _set_power_state_default(self, instance, state):
        """Set power state using default approach (libvirt boot ordering)

        :param instance: OpenStack instance object
        :param state: Power state to set
        :raises: `error.FishyError` if power state can't be set
        """
        # Check for delayed media eject
        delayed_media_eject = self._volume_vmedia_delay_eject.get(instance.id)

        if delayed_media_eject:
            self._logger.debug(
                'Create task to rebuild with blank-image for %(identity)s' %
                {'identity': instance.id})
            # Not running async here, as long as the blank image used is small
            # this should finish in ~20 seconds.
            self._submit_future(
                False, self._rebuild_with_blank_image, instance.id)
            self._remove_delayed_eject_metadata(instance.id)

            # Always raise 503 after triggering rebuild to force client retry
            # This avoids race conditions and prevents exceeding 60s timeout
            msg = ('SYS518: Cloud instance rebuilding, retry required')
            raise error.FishyError(msg, 503)

        if state in ('On', 'ForceOn'):
            if instance.power_state != self.NOVA_POWER_STATE_ON:
                self._cc.compute.start_server(instance.id)

        elif state == 'ForceOff':
            if instance.power_state == self.NOVA_POWER_STATE_ON:
                self._cc.compute.stop_server(instance.id)

        elif state == 'GracefulShutdown':
            if instance.power_state == self.NOVA_POWER_STATE_ON:
                self._cc.compute.stop_server(instance.id)

        elif state == 'GracefulRestart':
            if instance.power_state == self.NOVA_POWER_STATE_ON:
                self._cc.compute.reboot_server(
                    instance.id, reboot_type='SOFT'
                )

        elif state == 'ForceRestart':
            if instance.power_state == self.NOVA_POWER_STATE_ON:
                self._cc.compute.reboot_server(
                    instance.id, reboot_type='HARD'
                )

        else:
            self._raise_unknown_power_state(state)

    def _set_power_state_rescue(self, instance, state):
        """Set power state using rescue-based PXE boot approach

        This method is used when SUSHY_EMULATOR_OS_RESCUE_PXE_BOOT is enabled.
        It manages power state transitions while respecting the boot mode
        setting to determine whether to use Nova's rescue mode (for PXE boot)
        or regular boot (for disk boot).

        :param instance: OpenStack instance object
        :param state: Power state to set
        :raises: `error.FishyError` if power state can't be set
        """
        # Get boot mode from persistent storage
        boot_mode = self._get_boot_mode_for_rescue(instance)

        self._logger.debug(
            'Rescue power state handler: instance=%(id)s, state=%(state)s, '
            'boot_mode=%(mode)s, vm_state=%(vm_state)s' %
            {'id': instance.id, 'state': state, 'mode': boot_mode,
             'vm_state': instance.vm_state})

        if state in ('On', 'ForceOn'):
            if instance.power_state != self.NOVA_POWER_STATE_ON:
                self._power_on_with_boot_mode(instance, boot_mode)
                # Wait for Nova state to stabilize and verify power on
                self._wait_for_power_state_stable(
                    instance, expected_power_state=self.NOVA_POWER_STATE_ON)

        elif state == 'ForceOff':
            if instance.power_state == self.NOVA_POWER_STATE_ON:
                # Nova blocks stop on RESCUED instances, so unrescue first
                in_rescue = self._is_instance_in_rescue(instance)
                self._logger.debug(
                    'ForceOff: instance=%(id)s, in_rescue=%(rescue)s' %
                    {'id': instance.id, 'rescue': in_rescue})
                if in_rescue:
                    self._unrescue_before_power_operation(instance)
                self._cc.compute.stop_server(instance.id)

                # Wait for Nova state to stabilize and verify power off
                # Note: Nova power_state for SHUTOFF is not NOVA_POWER_STATE_ON
                # We expect any state other than ON (typically 4 for SHUTOFF)
                self._wait_for_power_state_stable(instance)

        elif state == 'GracefulShutdown':
            if instance.power_state == self.NOVA_POWER_STATE_ON:
                # Nova blocks stop on RESCUED instances, so unrescue first
                in_rescue = self._is_instance_in_rescue(instance)
                self._logger.debug(
                    'GracefulShutdown: instance=%(id)s, in_rescue=%(rescue)s' %
                    {'id': instance.id, 'rescue': in_rescue})
                if in_rescue:
                    self._unrescue_before_power_operation(instance)
                self._cc.compute.stop_server(instance.id)

                # Wait for Nova state to stabilize
                # Note: We don't verify expected power state for shutdown
                # operations as the final state can vary
                self._wait_for_power_state_stable(instance)

        elif state == 'GracefulRestart':
            if instance.power_state == self.NOVA_POWER_STATE_ON:
                self._restart_with_boot_mode(instance, boot_mode, 'SOFT')
                # Wait for Nova state to stabilize and verify power on
                self._wait_for_power_state_stable(
                    instance, expected_power_state=self.NOVA_POWER_STATE_ON)

        elif state == 'ForceRestart':
            if instance.power_state == self.NOVA_POWER_STATE_ON:
                self._restart_with_boot_mode(instance, boot_mode, 'HARD')
                # Wait for Nova state to stabilize and verify power on
                self._wait_for_power_state_stable(
                    instance, expected_power_state=self.NOVA_POWER_STATE_ON)

        else:
            self._raise_unknown_power_state(state)

    def _power_on_with_boot_mode(self, instance, boot_mode):
        """Power on instance with specified boot mode (rescue feature)

        Helper for _set_power_state_rescue(). Handles power-on logic based
        on the desired boot mode, using Nova's rescue mode for PXE boot or
        CD boot (virtual media).

        :param instance: OpenStack instance object
        :param boot_mode: Boot mode (RESCUE_MODE_PXE, RESCUE_MODE_CDROM,
            or RESCUE_MODE_DISK)
        """
        is_in_rescue = self._is_instance_in_rescue(instance)

        if boot_mode == self.RESCUE_MODE_PXE:
            # PXE boot requested - use rescue
            if not is_in_rescue:
                self._rescue_with_pxe_image(instance)
            else:
                # Already in rescue - only start if not already running
                # Nova will reject start if power_state indicates already
                # running
                if instance.power_state != self.NOVA_POWER_STATE_ON:
                    self._cc.compute.start_server(instance.id)
        elif boot_mode == self.RESCUE_MODE_CDROM:
            # CD boot requested - use rescue with vmedia image
            if not is_in_rescue:
                self._rescue_with_vmedia_image(instance)
            else:
                # Already in rescue - only start if not already running
                # Nova will reject start if power_state indicates already
                # running
                if instance.power_state != self.NOVA_POWER_STATE_ON:
                    self._cc.compute.start_server(instance.id)
        else:
            # Disk boot requested
            if is_in_rescue:
                # Need to unrescue first
                self._unrescue_before_power_operation(instance)

            # Refresh instance state after potential unrescue
            instance.fetch(self._cc.compute)

            # Only start if instance is not already running
            # Nova will reject start if power_state indicates already running
            if instance.power_state != self.NOVA_POWER_STATE_ON:
                self._cc.compute.start_server(instance.id)

    def _restart_with_boot_mode(self, instance, boot_mode, reboot_type):
        """Restart instance with specified boot mode (rescue feature)

        Helper for _set_power_state_rescue(). Handles restart logic based
        on the desired boot mode, using Nova's rescue mode for PXE boot or
        CD boot (virtual media).

        :param instance: OpenStack instance object
        :param boot_mode: Boot mode (RESCUE_MODE_PXE, RESCUE_MODE_CDROM,
            or RESCUE_MODE_DISK)
        :param reboot_type: Reboot type ('SOFT' or 'HARD')
        """
        is_in_rescue = self._is_instance_in_rescue(instance)

        if boot_mode == self.RESCUE_MODE_PXE:
            # PXE boot requested
            if not is_in_rescue:
                # Transition ACTIVE -> RESCUED via rescue
                self._rescue_with_pxe_image(instance)
                # Nova's rescue automatically powers on, so reboot to
                # complete restart
                self._cc.compute.reboot_server(
                    instance.id, reboot_type=reboot_type)
            else:
                # Already in RESCUED, just reboot (Nova preserves RESCUED
                # state)
                self._cc.compute.reboot_server(
                    instance.id, reboot_type=reboot_type)
        elif boot_mode == self.RESCUE_MODE_CDROM:
            # CD boot requested - use rescue with vmedia image
            if not is_in_rescue:
                # Transition ACTIVE -> RESCUED via rescue
                self._rescue_with_vmedia_image(instance)
                # Nova's rescue automatically powers on, so reboot to
                # complete restart
                self._cc.compute.reboot_server(
                    instance.id, reboot_type=reboot_type)
            else:
                # Already in RESCUED, just reboot (Nova preserves RESCUED
                # state)
                self._cc.compute.reboot_server(
                    instance.id, reboot_type=reboot_type)
        else:
            # Disk boot requested
            if is_in_rescue:
                # Unrescue first to boot from disk
                self._unrescue_before_power_operation(instance)
            self._cc.compute.reboot_server(
                instance.id, reboot_type=reboot_type)

    def get_boot_device(self, identity):
        """Get computer system boot device name

        :param identity: OpenStack instance name or ID

        :returns: boot device name as `str` or `None` if device name
            can't be determined. Valid values are: *Pxe*, *Hdd*, *Cd*.
        """
        try:
            instance = self._get_instance(identity)

        except error.FishyError:
            return

        # Check boot device based on configuration
        if self._rescue_enabled:
            # Use rescue boot mode from persistent storage
            boot_mode = self._get_boot_mode_for_rescue(instance)
            if boot_mode == self.RESCUE_MODE_PXE:
                return self.BOOT_DEVICE_MAP_REV['network']
            elif boot_mode == self.RESCUE_MODE_CDROM:
                return self.BOOT_DEVICE_MAP_REV['cdrom']
            else:
                return self.BOOT_DEVICE_MAP_REV['hd']
        else:
            # Use libvirt:pxe-first metadata (default behavior)
            # NOTE(etingof): the following probably only works with
            # libvirt-backed compute nodes
            metadata = self._get_server_metadata(instance.id)
            if metadata.get('libvirt:pxe-first'):
                return self.BOOT_DEVICE_MAP_REV['network']
            else:
                return self.BOOT_DEVICE_MAP_REV['hd']

    def set_boot_device(self, identity, boot_source):
        """Set computer system boot device name

        :param identity: OpenStack instance name or ID
        :param boot_source: string literal requesting boot device
            change on the system. Valid values are: *Pxe*, *Hdd*, *Cd*.

        :raises: `error.FishyError` if boot device can't be set
        """
        instance = self._get_instance(identity)

        try:
            target = self.BOOT_DEVICE_MAP[boot_source]

        except KeyError:
            msg = ('Unknown power state requested: '
                   '%(boot_source)s' % {'boot_source': boot_source})

            raise error.BadRequest(msg)

        # Set boot mode based on configuration
        if self._rescue_enabled:
            # Use persistent storage
            self._set_boot_mode_for_rescue(instance, target)
        else:
            # Use libvirt:pxe-first metadata (default/legacy behavior)
            # NOTE(etingof): the following probably only works with
            # libvirt-backed compute nodes
            self._cc.compute.set_server_metadata(
                instance.id,
                **{'libvirt:pxe-first': '1'
                   if target == self.BOOT_DEVICE_MAP['Pxe'] else ''}
            )

    def _is_instance_in_rescue(self, instance):
        """Check if instance is in rescue mode

        :param instance: OpenStack instance object
            (expected to have fresh state)
        :returns: True if instance is in RESCUED state, False otherwise
        """
        # Case-insensitive check (Nova returns lowercase 'rescued')
        is_rescued = (instance.vm_state or '').upper() == 'RESCUED'
        self._logger.debug(
            'Checking rescue state: instance=%(id)s, vm_state=%(state)s, '
            'is_rescued=%(rescued)s' %
            {'id': instance.id, 'state': instance.vm_state,
             'rescued': is_rescued})
        return is_rescued

    def _get_boot_mode_for_rescue(self, instance):
        """Get boot mode from persistent storage

        :param instance: OpenStack instance object
        :returns: Boot mode string (RESCUE_MODE_PXE or RESCUE_MODE_DISK)
        """
        return self._rescue_boot_modes.get(instance.id, self.RESCUE_MODE_DISK)

    def _set_boot_mode_for_rescue(self, instance, target):
        """Set boot mode in persistent storage

        Stores the boot mode (PXE, CD, or disk) for the instance.
        Rescue/unrescue operations are performed during power state
        transitions based on this stored setting.

        :param instance: OpenStack instance object
        :param target: boot device target from BOOT_DEVICE_MAP
        """
        if not self._rescue_enabled:
            return

        if target == self.BOOT_DEVICE_MAP['Pxe']:
            boot_mode = self.RESCUE_MODE_PXE
        elif target == self.BOOT_DEVICE_MAP['Cd']:
            boot_mode = self.RESCUE_MODE_CDROM
        else:
            boot_mode = self.RESCUE_MODE_DISK

        self._logger.debug(
            'Setting boot mode to %(mode)s for %(identity)s' %
            {'mode': boot_mode, 'identity': instance.id})

        self._rescue_boot_modes[instance.id] = boot_mode

    def _rescue_with_pxe_image(self, instance):
        """Rescue instance with appropriate iPXE image based on boot mode

        Note: Nova rescue mode support depends on instance and cloud
        configuration:
        - Image-backed instances: Supported on all Nova versions
        - Volume-backed instances: Requires microversion 2.87+
          (Ussuri/21.0.0+), rescue image with hw_rescue_bus and
          hw_rescue_device properties, and compute host with
          COMPUTE_RESCUE_BFV trait (libvirt driver)

        :param instance: OpenStack instance object

        :raises: `error.FishyError` if iPXE rescue image is not found
        """
        boot_mode = self.get_boot_mode(instance.id)

        if boot_mode == 'UEFI':
            image_name = self._config.get(
                'SUSHY_EMULATOR_OS_RESCUE_PXE_IMAGE_UEFI',
                'ipxe-rescue-uefi'
            )
        else:  # Legacy/BIOS
            image_name = self._config.get(
                'SUSHY_EMULATOR_OS_RESCUE_PXE_IMAGE_BIOS',
                'ipxe-rescue-bios'
            )

        image = self._cc.image.find_image(image_name)
        if image is None:
            msg = ('iPXE rescue image not found: %(image_name)s' %
                   {'image_name': image_name})
            raise error.FishyError(msg)

        self._logger.debug(
            'Rescuing instance %(identity)s with image %(image)s' %
            {'identity': instance.id, 'image': image.id})

        # Trigger rescue operation with the iPXE image
        self._cc.compute.rescue_server(instance.id,
                                       image_ref=image.id)

        # Wait for rescue operation to complete
        is_ready, _ = self._check_and_wait_for_task_state(instance)
        if not is_ready:
            # Rescue still in progress - return 503 to allow client retry
            msg = ('SYS518: Cloud instance entering rescue mode, '
                   'retry required')
            raise error.FishyError(msg, 503)

    def _rescue_with_vmedia_image(self, instance):
        """Rescue instance with virtual media ISO image

        Checks image upload status and raises 503 if still importing.
        Only proceeds with rescue if image is active.

        Note: Nova rescue mode support depends on instance and cloud
        configuration:
        - Image-backed instances: Supported on all Nova versions
        - Volume-backed instances: Requires microversion 2.87+
          (Ussuri/21.0.0+), rescue image with hw_rescue_bus and
          hw_rescue_device properties, and compute host with
          COMPUTE_RESCUE_BFV trait (libvirt driver)

        :param instance: OpenStack instance object

        :raises: `error.FishyError` if no image inserted, image still
            importing, or image import failed
        """
        image_id = self._rescue_vmedia_images.get(instance.id)

        if not image_id:
            raise error.FishyError(
                'No virtual media image inserted for instance')

        image = self._cc.image.get_image(image_id)

        if image.status in ('queued', 'importing'):
            msg = ('SYS518: Virtual media image still importing, '
                   'retry required')
            raise error.FishyError(msg, 503)

        if image.status != 'active':
            msg = ('Virtual media image import failed with status: %s'
                   % image.status)
            raise error.FishyError(msg, 500)

        self._logger.debug(
            'Rescuing instance %(identity)s with vmedia image %(image)s' %
            {'identity': instance.id, 'image': image.id})

        self._cc.compute.rescue_server(instance.id, image_ref=image.id)

        is_ready, _ = self._check_and_wait_for_task_state(instance)
        if not is_ready:
            msg = ('SYS518: Cloud instance entering rescue mode, '
                   'retry required')
            raise error.FishyError(msg, 503)

    def get_boot_mode(self, identity):
        """Get computer system boot mode.

        :returns: either *UEFI* or *Legacy* as `str` or `None` if
            current boot mode can't be determined
        """
        instance = self._get_instance(identity)

        hw_firmware_type = None
        if instance.image.get('id') is not None:
            image = self._get_image_info(instance.image['id'])
            if image:
                hw_firmware_type = image.properties.get('hw_firmware_type')
        elif len(instance.attached_volumes) > 0:
            vol = self._get_volume_info(instance.attached_volumes[0].id)
            hw_firmware_type = vol.volume_image_metadata.get(
                'hw_firmware_type')

        return self.BOOT_MODE_MAP_REV.get(hw_firmware_type)

    def set_boot_mode(self, identity, boot_mode):
        """Set computer system boot mode.

        :param boot_mode: string literal requesting boot mode
            change on the system. Valid values are: *UEFI*, *Legacy*.

        :raises: `error.FishyError` if boot mode can't be set
        """
        # just to make sure passed identity exists
        self._get_instance(identity)

        msg = ('The cloud driver %(driver)s does not allow changing boot '
               'mode through Redfish' % {'driver': self.driver})

        raise error.NotSupportedError(msg)

    def get_secure_boot(self, identity):
        """Get computer system secure boot state for UEFI boot mode.

        :returns: boolean of the current secure boot state

        :raises: `FishyError` if the state can't be fetched
        """
        if self.get_boot_mode(identity) == 'Legacy':
            msg = 'Legacy boot mode does not support secure boot'
            raise error.NotSupportedError(msg)

        instance = self._get_instance(identity)

        os_secure_boot = None
        if instance.image.get('id') is not None:
            image = self._get_image_info(instance.image['id'])
            if image:
                os_secure_boot = image.properties.get('os_secure_boot')
        elif len(instance.attached_volumes) > 0:
            vol = self._get_volume_info(instance.attached_volumes[0].id)
            os_secure_boot = vol.volume_image_metadata.get('os_secure_boot')

        return os_secure_boot == 'required'

    def set_secure_boot(self, identity, secure):
        """Set computer system secure boot state for UEFI boot mode.

        :param secure: boolean requesting the secure boot state

        :raises: `FishyError` if the can't be set
        """
        msg = ('The cloud driver %(driver)s does not support changing secure '
               'boot mode through Redfish' % {'driver': self.driver})
        raise error.NotSupportedError(msg)

    def get_total_memory(self, identity):
        """Get computer system total memory

        :param identity: OpenStack instance name or ID

        :returns: available RAM in GiB as `int` or `None` if total memory
            count can't be determined
        """
        try:
            flavor = self._get_flavor(identity)

        except error.FishyError:
            return

        return int(math.ceil(flavor.ram / 1024.))

    def get_total_cpus(self, identity):
        """Get computer system total count of available CPUs

        :param identity: OpenStack instance name or ID

        :returns: available CPU count as `int` or `None`
            if total memory count can't be determined
        """
        try:
            flavor = self._get_flavor(identity)

        except error.FishyError:
            return

        return flavor.vcpus

    def get_nics(self, identity):
        """Get server's network interfaces

        Use MAC address as network interface's id

        :param identity: OpenStack instance name or ID

        :returns: list of dictionaries with NIC attributes (id and mac)
        """
        instance = self._get_instance(identity)
        macs = set()
        if not instance.addresses:
            return macs

        for addresses in instance.addresses.values():
            for adr in addresses:
                try:
                    macs.add(adr['OS-EXT-IPS-MAC:mac_addr'])
                except KeyError:
                    self._logger.warning(
                        'Could not find MAC address in %s', adr)
        return [{'id': mac, 'mac': mac}
                for mac in macs]

    def get_boot_image(self, identity, device):
        """Get backend VM boot image info

        :param identity: node name or ID
        :param device: device type (from
            `sushy_tools.emulator.constants`)
        :returns: a `tuple` of (boot_image, write_protected, inserted)
        :raises: `error.FishyError` if boot device can't be accessed
        """
        instance = self._get_instance(identity)
        image_id = self._get_instance_image_id(instance)

        return image_id, False, True

    def set_boot_image(self, identity, device, boot_image=None,
                       write_protected=True):
        """Set backend VM boot image

        :param identity: node name or ID
        :param device: device type (from
            `sushy_tools.emulator.constants`)
        :param boot_image: ID of the image, or `None` to switch to
            boot from volume
        :param write_protected: expose media as read-only or writable

        :raises: `error.FishyError` if boot device can't be set
        """
        # Rescue-based vmedia uses insert_image/eject_image workflow
        # and doesn't use set_boot_image for rebuild operations
        if self._rescue_vmedia_enabled:
            return

        instance = self._get_instance(identity)
        instance_image = self._get_instance_image_id(instance)

        if instance_image == boot_image:
            msg = ('Image %(identity)s already has image %(boot_image)s. '
                   'Skipping rebuild.' % {'identity': identity,
                                          'boot_image': boot_image})
            self._logger.debug(msg)

        elif boot_image is None:
            if self._config.get('SUSHY_EMULATOR_OS_VMEDIA_DELAY_EJECT', True):
                self._logger.debug(
                    'Set delay-eject flag for vmedia eject on next power '
                    'action for %(identity)s' % {'identity': identity})
                self._volume_vmedia_delay_eject[instance.id] = True
            else:
                self._logger.debug(
                    'Create task to rebuild with blank-image for '
                    '%(identity)s' % {'identity': identity})
                # Not running async here, as long as the blank image used is
                # small this should finish in ~20 seconds.
                self._submit_future(
                    False, self._rebuild_with_blank_image, identity)

        else:
            if self._config.get('SUSHY_EMULATOR_OS_VMEDIA_DELAY_EJECT', True):
                # Make sure delay-eject flag is cleared when media is
                # inserted. Avoid race in case media is ejected and then
                # inserted without a power action.
                self._volume_vmedia_delay_eject.pop(instance.id, None)

            self._logger.debug(
                'Creating task to finish import and rebuild for %(identity)s' %
                {'identity': identity})
            self._submit_future(
                True, self._rebuild_with_imported_image, identity, boot_image)

    def _get_disk_format_from_content(self, file_path):
        """Detect disk format by inspecting file content (magic bytes).

        Detects ISO, QCOW, QCOW2, and raw formats using magic byte signatures.
        Falls back to filename-based inference if content cannot be read.

        :param file_path: Path to the image file
        :returns: String disk format ('iso', 'qcow2', or 'raw')
        """
        disk_format = self.DISK_FORMAT_RAW
        try:
            with open(file_path, 'rb') as f:
                header = f.read(len(self.QCOW_MAGIC_BYTES))
                if header == self.QCOW_MAGIC_BYTES:
                    disk_format = self.DISK_FORMAT_QCOW2
                else:
                    f.seek(self.ISO_MAGIC_OFFSET)
                    iso_sig = f.read(len(self.ISO_MAGIC_BYTES))
                    if iso_sig == self.ISO_MAGIC_BYTES:
                        disk_format = self.DISK_FORMAT_ISO

            self._logger.debug('Detected %s format for %s', disk_format,
                               os.path.basename(file_path))
        except (OSError, IOError) as e:
            self._logger.warning(
                'Failed to detect disk format for %s: %s. Falling back to '
                'filename inference.', os.path.basename(file_path), e)
            filename = os.path.basename(file_path)
            disk_format = self._get_disk_format_from_filename(filename)

        return disk_format

    def _get_disk_format_from_filename(self, filename):
        """Infer disk format from filename extension.

        Used as fallback when file is not available locally for inspection.

        :param filename: The filename to check
        :returns: String disk format ('iso', 'qcow2', or 'raw')
        """
        disk_format = self.DISK_FORMAT_RAW
        filename_lower = filename.lower()

        if filename_lower.endswith(self.ISO_EXTENSION):
            disk_format = self.DISK_FORMAT_ISO
        elif filename_lower.endswith(self.QCOW_EXTENSIONS):
            disk_format = self.DISK_FORMAT_QCOW2

        self._logger.debug('Inferred disk format %s from filename %s',
                           disk_format, filename)

        return disk_format

    def _get_disk_format(self, filename, local_file_path=None):
        """Determine the disk format for an image.

        Uses content inspection when local file is available, otherwise
        infers from filename extension. Can be overridden by configuration.

        :param filename: The filename of the image
        :param local_file_path: Optional local path to the image file
        :returns: String disk format ('iso', 'qcow2', or 'raw')
        """
        # Check for configuration override first
        override_format = self._config.get(
            'SUSHY_EMULATOR_OS_VMEDIA_DISK_FORMAT_OVERRIDE')
        if override_format:
            self._logger.debug('Using configured disk format override: %s',
                               override_format)
            return override_format

        if local_file_path:
            # File is local - inspect content for accurate detection
            return self._get_disk_format_from_content(local_file_path)
        else:
            # No local file - use filename extension as hint
            return self._get_disk_format_from_filename(filename)

    def insert_image(self, identity, image_url, local_file_path=None):
        self._logger.debug(
            'Creating task to insert image for %(identity)s' %
            {'identity': identity})
        return self._submit_future(
            False, self._insert_image, identity, image_url, local_file_path)

    def _insert_image(self, identity, image_url, local_file_path=None):
        # Common preparation for both approaches
        parsed_url = urlparse.urlparse(image_url)
        filename = os.path.basename(parsed_url.path)
        disk_format = self._get_disk_format(filename, local_file_path)
        unique = base64.urlsafe_b64encode(os.urandom(6)).decode('utf-8')
        boot_mode = self.get_boot_mode(identity)

        # Build base image properties
        image_properties = {}
        if boot_mode == 'UEFI':
            self._logger.debug('Setting UEFI image properties for '
                               '%(identity)s' % {'identity': identity})
            image_properties['hw_firmware_type'] = 'uefi'
            image_properties['hw_machine_type'] = 'q35'

        # Add rescue-specific properties if needed
        if self._rescue_vmedia_enabled:
            self._logger.debug(
                'Setting rescue device properties for vmedia image: '
                'hw_rescue_device=%(device)s, hw_rescue_bus=%(bus)s' %
                {'device': self._rescue_vmedia_device,
                 'bus': self._rescue_vmedia_bus})
            image_properties['hw_rescue_device'] = self._rescue_vmedia_device
            image_properties['hw_rescue_bus'] = self._rescue_vmedia_bus
            images_dict = self._rescue_vmedia_images
            attrs_dict = self._rescue_vmedia_attrs
            vmedia_type = 'rescue'
        else:
            images_dict = self._volume_vmedia_images
            attrs_dict = self._volume_vmedia_attrs
            vmedia_type = 'volume'

        # Build image attributes
        image_attrs = {
            'name': '%s %s' % (filename, unique),
            'disk_format': disk_format,
            'container_format': 'bare',
            'visibility': 'private'
        }

        if image_properties:
            image_attrs['properties'] = image_properties

        if local_file_path:
            image_attrs['filename'] = local_file_path

        image = None
        try:
            # Create image and begin importing
            image = self._cc.image.create_image(**image_attrs)

            if local_file_path:
                self._logger.debug(
                    'Uploading image file %(file)s from source %(url)s '
                    'for %(identity)s' % {'identity': identity,
                                          'file': local_file_path,
                                          'url': image_url})
            else:
                self._logger.debug(
                    'Importing image %(url)s for %(identity)s' %
                    {'identity': identity, 'url': image_url})
                self._cc.image.import_image(image, method='web-download',
                                            uri=image_url)

            # Store all data in PersistentDict
            instance = self._get_instance(identity)
            images_dict[instance.id] = image.id

            # Store vmedia attributes in PersistentDict for tracking
            vmedia_attrs = {'image_url': image_url}
            if local_file_path:
                vmedia_attrs['local_file_path'] = local_file_path
            attrs_dict[instance.id] = vmedia_attrs

            self._logger.debug(
                'Vmedia image %(image)s stored for %(identity)s (%(type)s)' %
                {'image': image.id, 'identity': identity, 'type': vmedia_type})

        except Exception as ex:
            msg = 'Failed insert image from URL %s: %s' % (image_url, ex)
            self._logger.exception(msg)
            image_id = image.id if image else None
            # Clean up on failure
            if image_id:
                try:
                    self._cc.delete_image(image_id)
                except Exception:
                    pass
            if local_file_path:
                try:
                    self._delete_local_file(local_file_path)
                except Exception:
                    pass
            if not isinstance(ex, error.FishyError):
                ex = error.FishyError(msg)
            raise ex

        return image.id, image.name

    def eject_image(self, identity):
        self._logger.debug(
            'Creating task to eject image for %(identity)s' %
            {'identity': identity})
        self._submit_future(False, self._eject_image, identity)

    def _eject_image(self, identity):
        """Eject virtual media image for both volume and rescue approaches"""
        # Select appropriate PersistentDict references
        if self._rescue_vmedia_enabled:
            images_dict = self._rescue_vmedia_images
            attrs_dict = self._rescue_vmedia_attrs
            vmedia_type = 'rescue'
        else:
            images_dict = self._volume_vmedia_images
            attrs_dict = self._volume_vmedia_attrs
            vmedia_type = 'volume'

        instance = None
        image_url = None
        local_file_path = None
        try:
            instance = self._get_instance(identity)

            # Retrieve vmedia attributes from PersistentDict
            vmedia_attrs = attrs_dict.get(instance.id, {})
            image_url = vmedia_attrs.get('image_url')
            local_file_path = vmedia_attrs.get('local_file_path')

            # Check PersistentDict for image ID
            image_id = images_dict.get(instance.id)

            if image_id is None:
                # Nothing to eject
                self._logger.debug(
                    'No %(type)s vmedia image to eject for %(identity)s' %
                    {'type': vmedia_type, 'identity': identity})
                return

            # Delete image from Glance
            image = self._cc.image.find_image(image_id)
            if image:
                self._logger.debug(
                    'Deleting %(type)s vmedia image %(image)s for '
                    '%(identity)s' %
                    {'type': vmedia_type, 'image': image.id,
                     'identity': identity})
                self._cc.delete_image(image.id)
            else:
                raise error.FishyError(
                    'Image not found in image service.')

            # Delete local file if it exists
            if local_file_path:
                try:
                    self._delete_local_file(local_file_path)
                except Exception:
                    pass

            # Clear PersistentDict entries
            del images_dict[instance.id]
            attrs_dict.pop(instance.id, None)

            # Additional cleanup for rescue vmedia
            if vmedia_type == 'rescue':
                # Set boot mode back to disk (mimics hardware boot
                # order fallback)
                self._rescue_boot_modes[instance.id] = self.RESCUE_MODE_DISK

            self._logger.debug(
                'Vmedia ejected for %(identity)s (%(type)s)' %
                {'identity': identity, 'type': vmedia_type})

        except Exception as ex:
            # Always wrap with context message
            msg = ('Failed ejecting image %s. %s' %
                   (image_url if image_url else 'unknown', ex))
            self._logger.exception(msg)
            raise error.FishyError(msg)

    def _submit_future(self, run_async, fn, identity, *args, **kwargs):
        future = self._futures.get(identity, None)
        if future is not None:
            if future.running():
                raise error.Conflict(
                    'An insert or eject operation is already in progress for '
                    '%(identity)s' % {'identity': identity})

            ex = future.exception()
            del self._futures[identity]
            if ex is not None:
                # A previous operation failed, and the server may be in an
                # unknown state. Raise the previous error as an error for
                # this operation.
                raise ex

        future = self._executor.submit(fn, identity, *args, **kwargs)
        self._futures[identity] = future
        if run_async:
            return
        ex = future.exception()
        if ex is not None:
            raise ex
        return future.result()

    def _rebuild_with_imported_image(self, identity, image_id):
        image_url = None
        image = None
        instance = None
        image_url = None
        image_local_file = None

        try:
            image = self._cc.image.get_image(image_id)
            instance = self._get_instance(identity)

            # Retrieve vmedia attributes from PersistentDict
            vmedia_attrs = self._volume_vmedia_attrs.get(instance.id, {})
            image_url = vmedia_attrs.get('image_url')
            image_local_file = vmedia_attrs.get('local_file_path')

            # Wait for image to be imported
            while image.status in ('queued', 'importing'):
                time.sleep(1)
                image = self._cc.image.get_image(image)

            if image.status != 'active':
                raise error.FishyError('Image import ended with status %s' %
                                       image.status)

            self._logger.debug(
                'Rebuilding %(identity)s with image %(image)s' %
                {'identity': identity, 'image': image.id})
            server = self._cc.compute.rebuild_server(identity, image.id)
            while server.status == 'REBUILD':
                server = self._cc.compute.get_server(identity)
                time.sleep(1)
            if server.status not in ('ACTIVE', 'SHUTOFF'):
                raise error.FishyError('Server rebuild attempt resulted in '
                                       'status %s' % server.status)
            self._logger.debug(
                'Rebuild %(identity)s complete' % {'identity': identity})

        except Exception as ex:
            msg = 'Failed insert image from URL %s: %s' % (image_url, ex)
            self._logger.exception(msg)
            # Clean up on failure
            if image:
                try:
                    self._cc.delete_image(image.id)
                except Exception:
                    pass
            if image_local_file:
                try:
                    self._delete_local_file(image_local_file)
                except Exception:
                    pass
            # Clear PersistentDict entries only if instance was retrieved
            if instance:
                self._volume_vmedia_images.pop(instance.id, None)
                self._volume_vmedia_attrs.pop(instance.id, None)
            if not isinstance(ex, error.FishyError):
                ex = error.FishyError(msg)
            raise ex
        finally:
            # Clean up local file after successful rebuild
            if image_local_file:
                try:
                    self._delete_local_file(image_local_file)
                except Exception:
                    pass

    def _rebuild_with_blank_image(self, identity):
        image_url = None
        try:
            instance = self._get_instance(identity)

            # Retrieve vmedia attributes from PersistentDict
            vmedia_attrs = self._volume_vmedia_attrs.get(instance.id, {})
            image_url = vmedia_attrs.get('image_url')
            blank_image = self._config.get(
                'SUSHY_EMULATOR_OS_VMEDIA_BLANK_IMAGE',
                'sushy-tools-blank-image')
            image = self._cc.image.find_image(blank_image)

            if image is None:
                msg = ('Failed ejecting image %s, vmedia blank image: %s not '
                       'found.' % (image_url, blank_image))
                raise error.FishyError(msg)

            self._logger.debug(
                'Rebuilding %(identity)s with image %(image)s' %
                {'identity': identity, 'image': image.id})
            server = self._cc.compute.rebuild_server(identity, image.id)

            while server.status == 'REBUILD':
                server = self._cc.compute.get_server(identity)
                time.sleep(1)
            if server.status not in ('ACTIVE', 'SHUTOFF'):
                raise error.FishyError('Server rebuild attempt resulted in '
                                       'status %s' % server.status)
            self._logger.debug(
                'Rebuild %(identity)s complete' % {'identity': identity})

        except Exception as ex:
            msg = 'Failed ejecting image %s: %s' % (image_url, ex)
            self._logger.exception(msg)
            if not isinstance(ex, error.FishyError):
                ex = error.FishyError(msg)
            raise ex

    @staticmethod
    def _delete_local_file(local_file):
        try:
            os.remove(local_file)
        except (FileNotFoundError, TypeError):
            pass

    def _remove_delayed_eject_metadata(self, identity):
        """Remove delayed eject flag from PersistentDict

        :param identity: node name or ID
        """
        try:
            instance = self._get_instance(identity)
            self._volume_vmedia_delay_eject.pop(instance.id, None)
        except Exception:
            pass
